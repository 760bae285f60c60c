/**
 * The log's batched output (server/platform/logger.ts): lines go out together, at most BATCH_MS late,
 * in order, and none is lost when the process exits right after logging (a fatal line, then
 * `process.exit`), in a real child process writing to a pipe.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');

function run(script: string) {
  const out = spawnSync(process.execPath, ['--import', 'tsx', '-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  expect(out.stderr).toBe('');
  return out.stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { msg: string; level: number });
}

test('lines logged just before process.exit are all written, in order', () => {
  const lines = run(`
    const { createLogger } = require('./server/platform/logger');
    const log = createLogger('info');
    for (let i = 0; i < 500; i++) log.info('line ' + i);
    log.fatal('the last words');
    process.exit(1);
  `);
  expect(lines.map((l) => l.msg)).toEqual([...Array.from({ length: 500 }, (_, i) => `line ${i}`), 'the last words']);
});

test('loggers on one descriptor share one output: lines of several turns and loggers keep their order', () => {
  const lines = run(`
    const { createLogger } = require('./server/platform/logger');
    const a = createLogger('info');
    const b = createLogger('info').child({ component: 'b' });
    let n = 0;
    const tick = () => {
      a.info('a ' + n);
      b.info('b ' + n);
      if (++n < 20) setImmediate(tick);
    };
    tick();
  `);
  expect(lines.map((l) => l.msg)).toEqual(Array.from({ length: 20 }, (_, i) => [`a ${i}`, `b ${i}`]).flat());
});
