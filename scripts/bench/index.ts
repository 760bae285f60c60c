/**
 * `npm run bench`: issue 8's benchmark. Builds (or reuses) the data sets, then runs the parts asked
 * for (scripts/bench/options.ts), each figure beside a bare baseline measured in the same run, and
 * prints the table with the machine it ran on; the same text goes to bench-results.md.
 * Progress goes to stderr, the results to stdout.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import mysql from 'mysql2/promise';
import { makeSelfSignedCert } from '../../server/platform/tls';
import { BenchContext, quietFor } from './context';
import { Dataset, benchDir, mysqlDataset, shapeFor, sqliteDataset } from './dataset';
import { BenchRow, formatTable } from './measure';
import { BenchOptions, parseOptions } from './options';
import { REPO_ROOT, entryPoint } from './processes';
import { runReadPart } from './read';
import { runSoakPart } from './soak';
import { runDepthPart } from './depth';
import { runWritesPart } from './writes';
import { runScaleOutPart } from './scaleout';
import { runLivePart } from './live';
import { runCrossLivePart } from './cross-live';
import { runInboxLivePart, runInboxPagePart } from './inbox';
import { runSearchPart } from './search';
import { runStartPart } from './start';
import { runMarkdownPart } from './markdown';
import { runMediaPart } from './media';
import { runAgentAlertsPart } from './agent-alerts';
import { runVisitorPart } from './visitor';

/** The SQLite data set keeps the shape but at most this many messages (one writer, one file). */
const SQLITE_MAX_MESSAGES = 200_000;
const FIRST_PORT = 18_443;

function log(message: string) {
  process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${message}\n`);
}

async function tlsFiles(): Promise<BenchContext['tls']> {
  const dir = path.join(benchDir(), 'tls');
  const certFile = path.join(dir, 'cert.pem');
  const keyFile = path.join(dir, 'key.pem');
  if (!fs.existsSync(certFile) || !fs.existsSync(keyFile)) {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const pair = await makeSelfSignedCert('localhost');
    fs.writeFileSync(certFile, pair.cert);
    fs.writeFileSync(keyFile, pair.key, { mode: 0o600 });
  }
  return { certFile, keyFile, cert: fs.readFileSync(certFile, 'utf8'), key: fs.readFileSync(keyFile, 'utf8') };
}

async function machine(options: BenchOptions): Promise<string> {
  const cpus = os.cpus();
  let mariadb = 'not used';
  if (options.engines.includes('mysql') || options.parts.includes('depth')) {
    const conn = await mysql.createConnection({ uri: options.mysqlServerUrl });
    const [[row]] = (await conn.query('SELECT VERSION() AS version')) as unknown as [{ version: string }[]];
    mariadb = row.version;
    await conn.end();
  }
  let commit = 'unknown';
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO_ROOT, encoding: 'utf8' }).trim();
  } catch {
    // Not a git checkout: the commit line says unknown.
  }
  const compiled = entryPoint('dist/server/main.js', 'server/main.ts').compiled;
  return [
    `- machine: ${cpus[0]?.model ?? 'unknown CPU'}, ${cpus.length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.type()} ${os.release()}`,
    `- Node ${process.version}, MariaDB ${mariadb}, service ${compiled ? 'compiled (dist/)' : 'through tsx (no dist/)'}, commit ${commit}`,
    `- load client, service and database on the same machine; ${options.rounds} alternated rounds of ${options.seconds} s (after ${options.warmupSeconds} s warm-up), medians`,
  ].join('\n');
}

function reproduceCommand(argv: string[]): string {
  return ['npm run bench', ...(argv.length ? ['--', ...argv] : [])].join(' ');
}

async function runDelivery(ctx: BenchContext): Promise<BenchRow[]> {
  try {
    const { runDeliveryBench } = await import('./delivery');
    return await runDeliveryBench({
      databaseUrl: ctx.options.engines.includes('mysql') ? ctx.options.mysqlServerUrl : undefined,
      rounds: ctx.options.rounds,
      quick: ctx.options.quick,
      log: ctx.log,
      quietWaitMs: ctx.options.quietWaitSeconds * 1000,
    });
  } catch (err) {
    log(`delivery part failed: ${(err as Error).stack ?? err}`);
    return [{ what: 'delivery', value: NaN, unit: '', note: `failed: ${(err as Error).message.slice(0, 200)}` }];
  }
}

async function main() {
  const argv = process.argv.slice(2);
  const options = parseOptions(argv);
  const started = Date.now();
  let port = FIRST_PORT;
  const ctx: BenchContext = { options, tls: await tlsFiles(), nextPort: () => port++, quiet: quietFor(options), log };

  // The delivery, live and media parts make databases of their own; the markdown and start parts need none.
  const needsData = options.parts.some(
    (p) => !['delivery', 'live', 'cross-live', 'inbox-live', 'markdown', 'search', 'start', 'media', 'agent-alerts', 'visitor'].includes(p),
  );
  const wantsMysql = options.engines.includes('mysql');
  const wantsSqlite = options.engines.includes('sqlite') || options.parts.includes('depth') || options.parts.includes('dataset');
  const shape = shapeFor(options.messages);
  if (needsData && (wantsMysql || options.parts.includes('depth') || options.parts.includes('dataset')))
    ctx.mysql = await mysqlDataset(options.mysqlServerUrl, shape, { rebuild: options.rebuild, log });
  if (needsData && wantsSqlite) ctx.sqlite = await sqliteDataset(shapeFor(Math.min(options.messages, SQLITE_MAX_MESSAGES)), { rebuild: options.rebuild, log });

  const engineSets = [wantsMysql ? ctx.mysql : undefined, options.engines.includes('sqlite') ? ctx.sqlite : undefined].filter(
    (d): d is Dataset => d !== undefined,
  );
  const rows: BenchRow[] = [];
  const appendices: string[] = [];
  const has = (part: string) => options.parts.includes(part as never);
  for (const dataset of engineSets) {
    if (has('read') || has('memory')) rows.push(...(await runReadPart(ctx, dataset, { read: has('read'), memory: has('memory') })));
    if (has('soak')) rows.push(...(await runSoakPart(ctx, dataset)));
  }
  if (has('depth')) {
    for (const dataset of [ctx.mysql, ctx.sqlite]) {
      if (!dataset) continue;
      const depth = await runDepthPart(ctx, dataset);
      rows.push(...depth.rows);
      if (depth.plans) appendices.push(`### Query plans at depth (MariaDB ANALYZE of the statement the service sent)\n\n\`\`\`\n${depth.plans}\n\`\`\``);
    }
  }
  if (has('writes')) for (const dataset of engineSets) rows.push(...(await runWritesPart(ctx, dataset)));
  if (has('scaleout') && ctx.mysql && wantsMysql) rows.push(...(await runScaleOutPart(ctx, ctx.mysql)));
  if (has('delivery')) rows.push(...(await runDelivery(ctx)));
  if (has('live')) for (const engine of options.engines) rows.push(...(await runLivePart(ctx, engine)));
  if (has('cross-live')) rows.push(...(await runCrossLivePart(ctx)));
  if (has('inbox')) for (const dataset of engineSets) rows.push(...(await runInboxPagePart(ctx, dataset)));
  if (has('inbox-live'))
    for (const engine of options.engines)
      rows.push(...(await runInboxLivePart(ctx, engine, options.quick ? { messages: 40, gapMs: 50 } : { messages: 200, gapMs: 50 })));
  if (has('markdown')) rows.push(...(await runMarkdownPart(ctx)));
  if (has('search')) rows.push(...(await runSearchPart(ctx)));
  if (has('start')) rows.push(...(await runStartPart(ctx)));
  if (has('media')) for (const engine of options.engines) rows.push(...(await runMediaPart(ctx, engine)));
  if (has('agent-alerts')) for (const engine of options.engines) rows.push(await runAgentAlertsPart(ctx, engine));
  if (has('visitor')) for (const engine of options.engines) rows.push(...(await runVisitorPart(ctx, engine)));

  const datasets = [ctx.mysql, ctx.sqlite]
    .filter((d): d is Dataset => d !== undefined)
    .map((d) => `- data set (${d.engine}): ${JSON.stringify(d.shape)}, built in ${d.buildSeconds} s`);
  const report = [
    `## Benchmark results (${new Date().toISOString().slice(0, 10)}, ${Math.round((Date.now() - started) / 1000)} s)`,
    '',
    await machine(options),
    ...datasets,
    `- reproduce: \`${reproduceCommand(argv)}\``,
    '',
    formatTable(rows),
    '',
    ...appendices,
    '',
  ].join('\n');
  process.stdout.write(report);
  fs.writeFileSync(path.resolve(REPO_ROOT, options.out), report);
  log(`written to ${options.out}`);
}

main().catch((err) => {
  log(`bench failed: ${(err as Error).stack ?? err}`);
  process.exit(1);
});
