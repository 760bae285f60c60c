/**
 * The package as a customer gets it: build, `npm pack`, install the tarball into a fresh temporary
 * project, compile TypeScript consumers (ESM and CommonJS, strict, skipLibCheck off, no Node types)
 * with the repository's tsc, run them and a plain CommonJS file against the running server, and
 * compile the README's integration example against the installed package.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { startSdkServer, SdkServer } from './helpers';

jest.setTimeout(300_000);

const root = path.join(__dirname, '../..');
const sdk = path.join(root, 'sdk');
const tsc = path.join(root, 'node_modules/typescript/bin/tsc');
const run = promisify(execFile);

let s: SdkServer;
let dir: string;
let tarball: string;
let env: NodeJS.ProcessEnv;
let conversationId: string;
let toClose: string;

function write(file: string, text: string) {
  fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
  fs.writeFileSync(path.join(dir, file), text);
}

function compile(project: string) {
  try {
    execFileSync(process.execPath, [tsc, '-p', path.join(dir, project)], { cwd: dir, stdio: 'pipe' });
  } catch (err) {
    const e = err as { stdout?: Buffer; stderr?: Buffer };
    throw new Error(`tsc -p ${project} failed:\n${e.stdout?.toString()}${e.stderr?.toString()}`);
  }
}

async function node(file: string): Promise<Record<string, unknown>> {
  const { stdout } = await run(process.execPath, [file], { cwd: dir, env, timeout: 60_000 });
  return JSON.parse(stdout.trim().split('\n').pop()!);
}

beforeAll(async () => {
  s = await startSdkServer();
  conversationId = (await s.h.visitorSay(s.h.site.id, 'v-package', 'Hello from the packaging test')).conversation.id;
  toClose = (await s.h.visitorSay(s.h.site.id, 'v-package-close', 'Close me')).conversation.id;
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sdk-consumer-'));
  fs.writeFileSync(path.join(dir, 'ca.pem'), s.ca);
  env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    NODE_EXTRA_CA_CERTS: path.join(dir, 'ca.pem'), // the built-in fetch then trusts the test server
    API_KEY: s.h.site.key,
    BASE_URL: s.baseUrl,
    WORKSPACE: s.h.site.id,
    CONVERSATION: conversationId,
    TO_CLOSE: toClose,
  };

  // Build and pack exactly as `npm publish` would.
  execFileSync(process.execPath, [path.join(sdk, 'scripts/build.mjs')], { cwd: sdk, stdio: 'pipe' });
  const packed = JSON.parse(
    execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', dir], { cwd: sdk, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }),
  );
  tarball = path.join(dir, packed[0].filename);

  // A fresh project that installs only the tarball (its dependency comes from the npm cache or registry).
  write('package.json', JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  execFileSync('npm', ['install', tarball, '--no-audit', '--no-fund', '--prefer-offline', '--ignore-scripts', '--no-package-lock'], {
    cwd: dir,
    stdio: 'pipe',
  });
});

afterAll(async () => {
  await s?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('the tarball holds the ESM and CJS builds, their types, the schemas and the README, nothing else', () => {
  const list = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .map((f) => f.replace(/^package\//, ''));
  for (const f of [
    'package.json',
    'README.md',
    'dist/esm/index.js',
    'dist/esm/index.d.ts',
    'dist/esm/validate.js',
    'dist/esm/package.json',
    'dist/cjs/index.js',
    'dist/cjs/index.d.ts',
    'dist/cjs/validate.js',
    'dist/cjs/package.json',
    'schemas/message.created.json',
    'schemas/conversation.started.json',
    'schemas/conversation.closed.json',
  ]) {
    expect(list).toContain(f);
  }
  expect(list.filter((f) => /^(src|scripts|examples|node_modules)\//.test(f) || /tsconfig/.test(f))).toEqual([]);
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'node_modules/@chat-service/sdk/package.json'), 'utf8'));
  expect(pkg.dependencies).toEqual({ 'openapi-fetch': '0.15.0' });
  expect(pkg.sideEffects).toBe(false);
  expect(pkg.peerDependenciesMeta).toEqual({ ajv: { optional: true }, 'ajv-formats': { optional: true } });
  // The optional peers are not installed with the package.
  expect(fs.existsSync(path.join(dir, 'node_modules/ajv'))).toBe(false);
  expect(fs.existsSync(path.join(dir, 'node_modules/openapi-fetch/package.json'))).toBe(true);
});

test('the ESM build imports no Node.js built-in statically (edge runtimes have fetch and Web Crypto only)', () => {
  const esm = path.join(dir, 'node_modules/@chat-service/sdk/dist/esm');
  for (const file of fs.readdirSync(esm).filter((f) => f.endsWith('.js'))) {
    const code = fs.readFileSync(path.join(esm, file), 'utf8');
    expect({ file, nodeImports: code.match(/from\s+['"](node:)?(fs|path|http|https|crypto|buffer|stream|net|tls|os)['"]/g) }).toEqual({
      file,
      nodeImports: null,
    });
    expect({ file, require: /\brequire\(/.test(code) }).toEqual({ file, require: false });
    expect({ file, buffer: /\bBuffer\./.test(code) }).toEqual({ file, buffer: false });
    expect({ file, nodeGlobals: code.match(/\b(setImmediate|__dirname|__filename)\b|\bglobal\./g) }).toEqual({ file, nodeGlobals: null });
  }
});

test('the ESM build runs without the Node.js global `process`', async () => {
  // Only `process` can go: Node's own fetch and FormData use Buffer, global and setImmediate
  // internally. That the SDK's code never touches Buffer or require is checked statically above,
  // and its sources compile without Node's types (sdk/tsconfig.json, types: []).
  write(
    'edge.mjs',
    `const { API_KEY, BASE_URL, CONVERSATION } = process.env;
delete globalThis.process;
const left = ['process'].filter((n) => n in globalThis);
const sdk = await import('@chat-service/sdk');
const chat = sdk.createClient({ apiKey: API_KEY, baseUrl: BASE_URL, maxRetries: 0 });
const reply = await chat.reply(CONVERSATION, { content: 'from the edge', files: [{ data: new TextEncoder().encode('edge bytes'), name: 'edge.txt', type: 'text/plain' }] });
const file = await chat.downloadMedia(reply.attachments[0].id);
const page = await chat.messages.list(CONVERSATION, { order: 'desc', limit: 1 }).firstPage();
const signed = await sdk.signTestWebhook({ payload: { id: 'message.created:01jd8x3r5k0000000000000000', event: 'message.created', data: { message: reply } }, secret: 'whsec_edge' });
const event = await sdk.verifyWebhook({ ...signed, secret: 'whsec_edge' });
const response = await sdk.handleWebhookRequest(new Request('https://edge.example/hook', { method: 'POST', headers: { ...signed.headers, 'X-Service-Delivery': 'message.created:01jd8x3r5k0000000000000001' }, body: signed.rawBody.replace('5k0000000000000000', '5k0000000000000001') }), { secret: 'whsec_edge', onError: () => {} }, () => {});
console.log(JSON.stringify({ left, content: page.data[0].content, file: new TextDecoder().decode(file.data), verified: event.data.message.id === reply.id, handler: response.status }));
`,
  );
  // The handler got a body that differs from the signed one: it must refuse it (400), proving it verified.
  const out = await node('edge.mjs');
  expect(out).toEqual({ left: [], content: 'from the edge', file: 'edge bytes', verified: true, handler: 400 });
});

test('a strict TypeScript ESM consumer compiles (types checked, no skipLibCheck, no Node types) and runs against the server', async () => {
  write(
    'src/consumer.ts',
    `import { createClient, ApiError, NotFoundError, verifyWebhook, signTestWebhook, type Conversation, type Message, type WebhookEvent } from '@chat-service/sdk';
declare const process: { env: Record<string, string | undefined> };

const chat = createClient({ apiKey: process.env.API_KEY!, baseUrl: process.env.BASE_URL!, maxRetries: 1, timeoutMs: 10_000 });
const out: Record<string, unknown> = { module: typeof import.meta.url };

const open: Conversation[] = await chat.conversations.list({ state: 'open', createdAfter: new Date(0) }).toArray();
out.found = open.some((c) => c.id === process.env.CONVERSATION);
const history: Message[] = [];
for await (const m of chat.messages.list(process.env.CONVERSATION!, { order: 'desc', limit: 1 })) history.push(m);
out.oldest = history[history.length - 1].content; // desc order, every page followed
const reply = await chat.reply(process.env.CONVERSATION!, { content: 'Hello from ESM', format: 'markdown' });
out.reply = [reply.origin, reply.direction, reply.format, reply.lastResponse.status];
out.own = chat.isOwnMessage(reply);
try {
  await chat.conversations.get('conv_00000000000000000000000000');
} catch (err) {
  if (err instanceof NotFoundError && err instanceof ApiError) out.notFound = [err.status, err.code, typeof err.requestId];
}
const payload: WebhookEvent = {
  id: 'message.created:01jd8x3r5k0000000000000000',
  event: 'message.created',
  createdAt: reply.createdAt,
  workspaceKey: process.env.WORKSPACE!,
  data: { conversation: open[0], message: reply },
};
const signed = await signTestWebhook({ payload, secret: 'whsec_consumer' });
const event = await verifyWebhook({ ...signed, secret: 'whsec_consumer' });
if (event.event === 'message.created') out.verified = event.data.message.content;

// The types catch mistakes (compiled, never called):
export function typeErrors() {
  // @ts-expect-error 'archived' is not a state
  chat.conversations.list({ state: 'archived' });
  // @ts-expect-error format is plain or markdown
  chat.reply('conv_x', { content: 'x', format: 'html' });
  // @ts-expect-error the raw client knows the paths
  chat.api.GET('/conversation');
  // @ts-expect-error a message has no 'author'
  history[0].author;
}
out.requestIdHeader = typeof (await chat.conversations.get(process.env.CONVERSATION!)).lastResponse.headers.get('x-request-id');
console.log(JSON.stringify(out));
`,
  );
  write(
    'tsconfig.json',
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        lib: ['ES2022', 'DOM'],
        types: [],
        strict: true,
        skipLibCheck: false,
        outDir: 'out',
        noEmitOnError: true,
      },
      files: ['src/consumer.ts'],
    }),
  );
  compile('tsconfig.json');
  const out = await node('out/consumer.js');
  expect(out).toEqual({
    module: 'string',
    found: true,
    oldest: 'Hello from the packaging test',
    reply: ['api', 'outgoing', 'markdown', 201],
    own: true,
    notFound: [404, 'not_found', 'string'],
    verified: 'Hello from ESM',
    requestIdHeader: 'string',
  });
});

test('a TypeScript CommonJS consumer (.cts) compiles against the CJS types and runs', async () => {
  write(
    'cjs/consumer.cts',
    `import { createClient, RateLimitError, type Page, type Conversation } from '@chat-service/sdk';
import { validateEvent } from '@chat-service/sdk/validate';
declare const process: { env: Record<string, string | undefined> };
async function main() {
  const chat = createClient({ apiKey: process.env.API_KEY!, baseUrl: process.env.BASE_URL! });
  const page: Page<Conversation> = await chat.conversations.list({ limit: 100 }).firstPage();
  const closed = await chat.close(page.data.find((c) => c.id === process.env.TO_CLOSE)!.id);
  console.log(JSON.stringify({ state: closed.state, rateLimitClass: typeof RateLimitError, validator: typeof validateEvent }));
}
main();
`,
  );
  write(
    'tsconfig.cjs.json',
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        lib: ['ES2022', 'DOM'],
        types: [],
        strict: true,
        skipLibCheck: true,
        outDir: 'out-cjs',
        noEmitOnError: true,
      },
      files: ['cjs/consumer.cts'],
    }),
  );
  compile('tsconfig.cjs.json');
  // Older projects resolve with moduleResolution node10 (no `exports`): typesVersions covers /validate.
  write(
    'legacy/consumer.ts',
    `import { createClient, type Message } from '@chat-service/sdk';\nimport { validateEvent } from '@chat-service/sdk/validate';\nexport const make = (m: Message) => [createClient, validateEvent(m)];\n`,
  );
  write(
    'legacy/tsconfig.json',
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'CommonJS',
        moduleResolution: 'node10',
        lib: ['ES2022', 'DOM'],
        types: [],
        strict: true,
        noEmit: true,
        ignoreDeprecations: '5.0',
      },
      files: ['consumer.ts'],
    }),
  );
  compile('legacy/tsconfig.json');
  // The validator's optional peers, as a customer would add them (linked from the repository's install).
  for (const peer of ['ajv', 'ajv-formats']) fs.symlinkSync(path.join(root, 'node_modules', peer), path.join(dir, 'node_modules', peer), 'dir');
  try {
    const out = await node('out-cjs/consumer.cjs');
    expect(out).toEqual({ state: 'closed', rateLimitClass: 'function', validator: 'function' });
  } finally {
    for (const peer of ['ajv', 'ajv-formats']) fs.unlinkSync(path.join(dir, 'node_modules', peer));
  }
});

test('a plain CommonJS file requires the package and runs; exports hide the internals', async () => {
  for (const peer of ['ajv', 'ajv-formats']) fs.symlinkSync(path.join(root, 'node_modules', peer), path.join(dir, 'node_modules', peer), 'dir');
  write(
    'plain.cjs',
    `const sdk = require('@chat-service/sdk');
const { validateEvent } = require('@chat-service/sdk/validate');
const schema = require('@chat-service/sdk/schemas/message.created.json');
const { version } = require('@chat-service/sdk/package.json');
let internal = 'exported';
try { require('@chat-service/sdk/dist/cjs/client.js'); } catch (e) { internal = e.code; }
(async () => {
  const chat = sdk.createClient({ apiKey: process.env.API_KEY, baseUrl: process.env.BASE_URL });
  const reply = await chat.reply(process.env.CONVERSATION, { content: 'Hello from CommonJS', files: [{ data: Buffer.from('hi'), name: 'hi.txt', type: 'text/plain' }] });
  const file = await chat.downloadMedia(reply.attachments[0].id);
  const own = chat.isOwnMessage(reply);
  let error;
  try { await sdk.createClient({ apiKey: 'wck_wrong', baseUrl: process.env.BASE_URL, maxRetries: 0 }).conversations.get(process.env.CONVERSATION); }
  catch (e) { error = [e.constructor.name, e instanceof sdk.ApiError, e.status, e.code]; }
  const event = { id: 'conversation.closed:01jd8x3r5k0000000000000000', event: 'conversation.closed', createdAt: reply.createdAt,
    workspaceKey: process.env.WORKSPACE, data: { conversation: (await chat.conversations.get(process.env.CONVERSATION)), message: null } };
  console.log(JSON.stringify({ file: Buffer.from(file.data).toString(), type: file.contentType, own, error, valid: validateEvent(event).valid,
    schemaId: schema.$id, version, version2: sdk.VERSION, internal }));
})().catch((e) => { console.error(e); process.exit(1); });
`,
  );
  try {
    const out = await node('plain.cjs');
    expect(out).toEqual({
      file: 'hi',
      type: 'text/plain',
      own: true,
      error: ['AuthenticationError', true, 401, 'unauthorized'],
      valid: true,
      schemaId: expect.stringMatching(/message\.created\.json$/),
      version: expect.any(String),
      version2: expect.any(String),
      internal: 'ERR_PACKAGE_PATH_NOT_EXPORTED',
    });
    expect(out.version).toBe(out.version2);
  } finally {
    for (const peer of ['ajv', 'ajv-formats']) fs.unlinkSync(path.join(dir, 'node_modules', peer));
  }
});

/** The first ```ts block after a README heading. */
function readmeBlock(heading: string): string {
  const readme = fs.readFileSync(path.join(sdk, 'README.md'), 'utf8');
  const at = readme.indexOf(heading);
  expect(at).toBeGreaterThan(-1);
  return /```ts\n([\s\S]*?)```/.exec(readme.slice(at))![1];
}

test('the README example is sdk/examples/integration.ts; it, the quick start and a Fastify app compile against the installed package', () => {
  const example = fs.readFileSync(path.join(sdk, 'examples/integration.ts'), 'utf8').replace("from '../src'", "from '@chat-service/sdk'");
  expect(example).toContain("from '@chat-service/sdk'");
  // The README shows the file from its first import on, verbatim.
  expect(readmeBlock('## A complete integration')).toBe(example.slice(example.indexOf('import fs')));
  write('quickstart/package.json', JSON.stringify({ type: 'module' }));
  write('quickstart/quickstart.ts', readmeBlock('## Quick start'));
  write(
    'quickstart/tsconfig.json',
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        types: ['node'],
        typeRoots: [path.join(root, 'node_modules/@types')],
      },
      files: ['quickstart.ts'],
    }),
  );
  compile('quickstart/tsconfig.json');
  write('example/package.json', JSON.stringify({ type: 'commonjs' }));
  write('example/integration.ts', example);
  write(
    'example/fastify-app.ts',
    `import Fastify from 'fastify';
import { fastifyWebhookPlugin } from '@chat-service/sdk';
const app = Fastify();
app.register(fastifyWebhookPlugin, { prefix: '/webhooks/chat', secret: 'whsec_x', onEvent: async (event) => { if (event.event === 'conversation.closed') return event.data.message; } });
`,
  );
  // fastify (a devDependency of sdk/, `npm ci --prefix sdk`) linked in, as a customer's own dependency would be.
  expect(fs.existsSync(path.join(sdk, 'node_modules/fastify'))).toBe(true);
  fs.symlinkSync(path.join(sdk, 'node_modules/fastify'), path.join(dir, 'node_modules/fastify'), 'dir');
  write(
    'example/tsconfig.json',
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        types: ['node'],
        typeRoots: [path.join(root, 'node_modules/@types')],
      },
      files: ['integration.ts', 'fastify-app.ts'],
    }),
  );
  compile('example/tsconfig.json');
});
