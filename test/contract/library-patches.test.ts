/**
 * Canaries for docs/library-patches.md: one test per assumption a library patch makes about the
 * library, each failing as soon as the library behaves otherwise (not when a feature test happens
 * to notice). Row numbers refer to the list.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import knexFactory, { Knex } from 'knex';
import request from 'supertest';
import { createDb } from '../../server/db/knex';
import {
  manageDocument,
  openApiDocument,
  resolveComponentSchemasDirectly,
  type Preprocessor,
  type ResolveSchema,
  validateAgainst,
  validatorModule,
  windowDocument,
} from '../../server/http/openapi-document';
import { fastJson } from '../../server/http/json';
import { createTestDatabase, TEST_DB } from '../helpers/db';

const ROOT = path.join(__dirname, '..', '..');
const LIST = fs.readFileSync(path.join(ROOT, 'docs', 'library-patches.md'), 'utf8');

/** The version in the package.json above the entry point Node resolves (some packages do not export ./package.json). */
function installedVersion(name: string, from: string): string {
  let dir = path.dirname(require.resolve(name, { paths: [from] }));
  for (;;) {
    const manifest = path.join(dir, 'package.json');
    if (fs.existsSync(manifest)) {
      const json = JSON.parse(fs.readFileSync(manifest, 'utf8')) as { name?: string; version: string };
      if (json.name === name) return json.version;
    }
    if (dir === path.dirname(dir)) throw new Error(`no package.json for ${name}`);
    dir = path.dirname(dir);
  }
}

test('each patched package is the version this list was reviewed against', () => {
  const pinned = [...LIST.matchAll(/^\| `([^`]+)` +\| (\d+\.\d+\.\d+) +\|$/gm)].map(([, name, version]) => [name, version]);
  expect(pinned.map(([name]) => name)).toEqual(expect.arrayContaining(['knex', 'mysql2', 'path-to-regexp', 'express', 'express-openapi-validator']));
  for (const [name, version] of pinned) {
    // The copy the server actually loads (path-to-regexp: the one the validator resolves).
    const from = name === 'path-to-regexp' ? require.resolve('express-openapi-validator') : ROOT;
    expect(`${name} ${installedVersion(name, from)}`).toBe(`${name} ${version}`);
  }
});

describe('1. SQLite transactions begin IMMEDIATE', () => {
  let dir: string;
  let db: Knex;
  const sent: string[] = [];
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'canary-'));
    db = createDb({ dataDir: dir });
    db.on('query', (q: { sql: string }) => sent.push(q.sql));
  });
  afterAll(async () => {
    await db.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  beforeEach(() => {
    sent.length = 0;
  });

  test('knex makes transactions with client.transaction', async () => {
    const spy = jest.spyOn(db.client as { transaction: () => unknown }, 'transaction');
    try {
      await db.transaction(async (trx) => trx.raw('select 1'));
      expect(spy).toHaveBeenCalledTimes(1);
    } finally {
      spy.mockRestore();
    }
  });

  test('the first statement of a write transaction is BEGIN IMMEDIATE, of a read-only one BEGIN, of a nested one a SAVEPOINT', async () => {
    await db.transaction(async (trx) => {
      await trx.raw('select 1');
      await trx.transaction(async (inner) => inner.raw('select 2'));
    });
    expect(sent[0]).toBe('BEGIN IMMEDIATE;');
    expect(sent[2]).toMatch(/^SAVEPOINT /);
    sent.length = 0;
    await db.transaction(async (trx) => trx.raw('select 1'), { readOnly: true });
    expect(sent[0]).toBe('BEGIN;');
  });

  test("the class we extend is the one knex's better-sqlite3 client uses (it still begins deferred)", async () => {
    const SqliteTransaction = require('knex/lib/dialects/sqlite3/execution/sqlite-transaction');
    const plain = knexFactory({ client: 'better-sqlite3', connection: { filename: ':memory:' }, useNullAsDefault: true });
    const made: unknown[] = [];
    const original = plain.client.transaction.bind(plain.client);
    plain.client.transaction = (...args: unknown[]) => {
      const trx = original(...args);
      made.push(trx);
      return trx;
    };
    const plainSent: string[] = [];
    plain.on('query', (q: { sql: string }) => plainSent.push(q.sql));
    try {
      await plain.transaction(async (trx) => trx.raw('select 1'));
      expect(made[0]).toBeInstanceOf(SqliteTransaction);
      expect(plainSent[0]).toBe('BEGIN;');
    } finally {
      await plain.destroy();
    }
  });

  test('4. every query and transaction acquires its connection through client.acquireConnection', async () => {
    const spy = jest.spyOn(db.client as { acquireConnection: () => Promise<unknown> }, 'acquireConnection');
    try {
      await db.raw('select 1');
      await db.transaction(async (trx) => trx.raw('select 1'));
      expect(spy).toHaveBeenCalledTimes(2);
    } finally {
      spy.mockRestore();
    }
  });
});

describe('2-4. the MySQL stall guard', () => {
  // A knex mysql2 client needs no server until it connects; its warning about a refused connection is expected here.
  const mysql = knexFactory({ client: 'mysql2', connection: { host: '127.0.0.1', port: 1 }, log: { warn: () => undefined } });
  afterAll(() => mysql.destroy());

  test("2. knex's mysql2 client sends each statement as connection.query(options, bindings, callback)", async () => {
    const calls: unknown[][] = [];
    const connection = {
      query: (...args: unknown[]) => {
        calls.push(args);
        (args[2] as (err: null, rows: unknown[], fields: unknown[]) => void)(null, [{ one: 1 }], []);
      },
    };
    const client = mysql.client as { _query(conn: unknown, obj: object): Promise<{ response: unknown }> };
    const done = await client._query(connection, { sql: 'select ?', bindings: [1] });
    expect(calls).toHaveLength(1);
    expect(calls[0][0]).toMatchObject({ sql: 'select ?' });
    expect(calls[0][1]).toEqual([1]);
    expect(typeof calls[0][2]).toBe('function');
    expect(done.response).toEqual([[{ one: 1 }], []]);
  });

  test("2. a mysql2 connection's query is Connection.prototype.query (an own property shadows it)", () => {
    const mysql2 = require('mysql2') as { Connection: { prototype: { query: unknown } }; createConnection(o: object): object };
    const conn = mysql2.createConnection({ host: '127.0.0.1', port: 1, connectTimeout: 1 }) as {
      query: unknown;
      on(e: string, f: () => void): void;
      destroy(): void;
    };
    conn.on('error', () => undefined);
    try {
      expect(typeof mysql2.Connection.prototype.query).toBe('function');
      expect(Object.prototype.hasOwnProperty.call(conn, 'query')).toBe(false);
      expect(conn.query).toBe(mysql2.Connection.prototype.query);
    } finally {
      conn.destroy();
    }
  });

  test("3. knex's pool refuses a connection marked __knex__disposed, and mysql2's one whose stream is destroyed", () => {
    const client = mysql.client as { getPoolSettings(pool: object): { validate(conn: object): boolean } };
    const { validate } = client.getPoolSettings({});
    const healthy = () => ({ stream: { destroyed: false } });
    expect(validate(healthy())).toBe(true);
    expect(validate({ ...healthy(), __knex__disposed: new Error('gone') })).toBe(false);
    expect(validate({ stream: { destroyed: true } })).toBe(false);
  });

  test('4. knex.destroy() calls client.destroy', async () => {
    const other = knexFactory({ client: 'mysql2', connection: { host: '127.0.0.1', port: 1 } });
    const spy = jest.spyOn(other.client as { destroy: () => Promise<void> }, 'destroy');
    await other.destroy();
    expect(spy).toHaveBeenCalledTimes(1);
  });

  (TEST_DB === 'mysql' ? test : test.skip)('2. on MariaDB, every pooled connection carries the guard', async () => {
    const database = await createTestDatabase();
    const db = createDb({ databaseUrl: database.databaseUrl, dataDir: database.dataDir });
    const conn = (await db.client.acquireConnection()) as { query: unknown };
    try {
      expect(Object.prototype.hasOwnProperty.call(conn, 'query')).toBe(true);
    } finally {
      await db.client.releaseConnection(conn); // the pool's destroy waits for it
      await db.destroy();
      await database.drop();
    }
  });
});

/** A document of one operation, to run the validator without the service. */
const DOC = {
  openapi: '3.1.0',
  info: { title: 'canary', version: '1' },
  paths: {
    '/things/{id}': {
      get: {
        parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
        responses: {
          '200': {
            description: 'ok',
            content: {
              'application/json': { schema: { type: 'object', required: ['data'], properties: { data: { type: 'string' } }, additionalProperties: false } },
            },
          },
        },
      },
    },
  },
};

function validatedApp(answer: (id: string) => unknown) {
  const app = express();
  fastJson(app);
  app.use(validateAgainst(DOC, true));
  app.get('/things/:id', (req, res) => {
    res.json(answer(String(req.params.id)));
  });
  app.use((err: { status?: number }, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    res.status(err.status ?? 500).send('refused');
  });
  return app;
}

test('5. the validator reads pathToRegexp through the module export at call time', async () => {
  const app = validatedApp((id) => ({ data: id }));
  const module = validatorModule<{
    pathToRegexp: (...args: unknown[]) => unknown;
  }>('path-to-regexp');
  const installed = module.pathToRegexp;
  let calls = 0;
  module.pathToRegexp = (...args: unknown[]) => {
    calls++;
    return installed(...args);
  };
  try {
    const res = await request(app).get('/things/a1');
    expect(res.status).toBe(200);
    expect(calls).toBeGreaterThan(0);
  } finally {
    module.pathToRegexp = installed;
  }
});

test('7. the validator builds its document checker through the module export, with validateApiSpec', async () => {
  const module = validatorModule<{ OpenAPISchemaValidator: new (opts: { validateApiSpec?: boolean }) => unknown }>(
    'express-openapi-validator/dist/framework/openapi.schema.validator',
  );
  const installed = module.OpenAPISchemaValidator;
  const seen: { validateApiSpec?: boolean }[] = [];
  module.OpenAPISchemaValidator = function spy(opts: { validateApiSpec?: boolean }) {
    seen.push(opts);
    return new installed(opts);
  } as unknown as typeof installed;
  try {
    for (const validate of [false, true]) {
      const app = express();
      app.use(
        OpenApiValidator.middleware({
          apiSpec: structuredClone(DOC) as never,
          validateApiSpec: validate,
          validateRequests: true,
        }) as unknown as express.RequestHandler[],
      );
      app.get('/things/:id', (_req, res) => res.json({ data: 'x' }));
      expect((await request(app).get('/things/a1')).status).toBe(200);
    }
    expect(seen.map((o) => o.validateApiSpec)).toEqual([false, true]);
  } finally {
    module.OpenAPISchemaValidator = installed;
  }
});

test('7. a document that breaks the OpenAPI schema is refused where answers are checked, and only there', async () => {
  const broken = { ...structuredClone(DOC), info: { version: 1 } };
  const quiet = jest.spyOn(console, 'error').mockImplementation(() => {}); // the validator prints the document's errors
  const statusWith = async (checked: boolean) => {
    const app = express();
    app.use(validateAgainst(structuredClone(broken), checked));
    app.get('/things/:id', (_req, res) => res.json({ data: 'x' }));
    app.use((err: { status?: number }, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.status(err.status ?? 500).send('refused');
    });
    return (await request(app).get('/things/a1')).status;
  };
  try {
    expect(await statusWith(true)).toBe(500);
    expect(await statusWith(false)).toBe(200);
  } finally {
    quiet.mockRestore();
  }
});

test("8. the preprocessor's answer for a component reference is the document's own component object", async () => {
  resolveComponentSchemasDirectly();
  const module = validatorModule<{ SchemaPreprocessor: { prototype: { resolveSchema: ResolveSchema } } }>(
    'express-openapi-validator/dist/middlewares/parsers/schema.preprocessor',
  );
  const proto = module.SchemaPreprocessor.prototype;
  const installed = proto.resolveSchema;
  const original = installed.unpatched;
  expect(original).toBeDefined();
  let compared = 0;
  const mismatches: string[] = [];
  // The library's own answer, for every reference the real documents make while a validator is set up.
  proto.resolveSchema = function (this: Preprocessor, schema: unknown) {
    const answer = original!.call(this, schema);
    const ref = (schema as { $ref?: unknown } | null)?.$ref;
    if (typeof ref === 'string' && ref.startsWith('#/components/schemas/')) {
      compared++;
      if (answer !== this.apiDoc.components?.schemas?.[ref.slice('#/components/schemas/'.length)]) mismatches.push(ref);
    }
    return answer;
  };
  try {
    for (const doc of [openApiDocument(), manageDocument(), windowDocument()]) {
      const app = express();
      app.use(OpenApiValidator.middleware({ apiSpec: doc as never, validateApiSpec: false, validateRequests: true }) as unknown as express.RequestHandler[]);
      app.use((_req, res) => res.status(204).end());
      await request(app).get('/no-such-path'); // the set-up runs on the first request
    }
  } finally {
    proto.resolveSchema = installed;
  }
  expect(compared).toBeGreaterThan(100);
  expect(mismatches).toEqual([]);
});

describe("6. res.json on the app's response prototype", () => {
  test("each response's prototype is app.response", async () => {
    const app = express();
    let proto: unknown;
    app.get('/', (_req, res) => {
      proto = Object.getPrototypeOf(res);
      res.end();
    });
    await request(app).get('/');
    expect(proto).toBe(app.response);
  });

  test('the response validator still sees a body sent through it', async () => {
    const ok = await request(validatedApp((id) => ({ data: id }))).get('/things/a1');
    expect(ok.body).toEqual({ data: 'a1' });
    const bad = await request(validatedApp(() => ({ data: 1 }))).get('/things/a1');
    expect(bad.status).toBe(500);
  });
});
