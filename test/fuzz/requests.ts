import fc from 'fast-check';
import type { Operation, Parameter, Schema } from './operations';
import { oddCharacter, oddString, valid, wrongType } from './schema-arbitraries';
import type { Delivery, WireRequest } from './wire';

/**
 * Request generators: for every operation of the document a well-formed request built from its
 * schemas (path and query parameters, headers, JSON and multipart bodies), then 0 to 3 mutations
 * that break it the way hostile or unlucky clients do. A generated case is a plain description;
 * `toWire` turns it into the exact bytes that are sent, so a failure prints both.
 */

export interface FuzzLimits {
  /** MAX_ATTACHMENT_BYTES the app runs with (kept small so "file too large" stays cheap). */
  maxFileBytes: number;
}

/** A request as sent, with a short account of how it was made (printed on failure). */
export interface FuzzCase extends WireRequest {
  operationId: string;
  recipe: string[];
}

const JSON_LIMIT = 64 * 1024;
const utf8AsLatin1 = (s: string) => Buffer.from(s, 'utf8').toString('latin1');

/** Percent-encodes every byte of the UTF-8 form except unreserved characters (lone surrogates too). */
export function pctEncode(value: string): string {
  let out = '';
  for (const byte of Buffer.from(value, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-._~]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

// ---------------------------------------------------------------- multipart

interface FilePart {
  field: string;
  filename: string | null;
  /** Raw Content-Disposition filename bytes (latin1 string), when the name itself is the test. */
  rawFilename?: string;
  contentType: string | null;
  size: number;
  fill: number;
}

interface MultipartSpec {
  boundary: string;
  fields: [string, string][];
  files: FilePart[];
  flaws: MultipartFlaw[];
}

type MultipartFlaw =
  | { f: 'truncateInFile'; at: number }
  | { f: 'truncate'; at: number }
  | { f: 'noClosing' }
  | { f: 'wrongBoundary' }
  | { f: 'noBoundaryParam' }
  | { f: 'quotedBoundary' }
  | { f: 'lfOnly' }
  | { f: 'noDisposition' }
  | { f: 'preamble'; text: string }
  | { f: 'longPartContentType'; length: number }
  | { f: 'manyPartHeaders' }
  | { f: 'tooManyFiles' }
  | { f: 'fileOverLimit' }
  | { f: 'contentOverLimit' }
  | { f: 'duplicateContent' }
  | { f: 'unknownField'; name: string }
  | { f: 'fileAsText' }
  | { f: 'nulInField' };

const boundaryArb = fc
  .stringMatching(/^[A-Za-z0-9'()+_,.\-=?]{1,60}$/, { size: 'xsmall' })
  .filter((b) => !b.endsWith(' '))
  .map((b) => `fz${b}`);

const filenameArb = fc.oneof(
  { weight: 4, arbitrary: fc.stringMatching(/^[a-z0-9_-]{1,12}\.(txt|png|pdf|bin)$/, { size: 'xsmall' }) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '../../etc/passwd',
      '..\\..\\boot.ini',
      '',
      '.htaccess',
      'résumé €.pdf',
      'фото.png',
      '\u202egnp.exe',
      'a"b.txt',
      'a\\"b.txt',
      'x'.repeat(1000) + '.txt',
      'emoji😀.png',
      'nul\u0000byte.txt',
      'CON',
      ' spaced .txt ',
    ),
  },
  { weight: 1, arbitrary: fc.string({ unit: oddCharacter, minLength: 1, maxLength: 8 }) },
);

const fileContentTypeArb = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('text/plain', 'image/png', 'application/pdf', 'application/octet-stream') },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      null,
      '',
      'text/html',
      'image/svg+xml',
      'x',
      'TEXT/PLAIN; charset=utf-8',
      '*/*',
      'a/b/c',
      'image/png\u00ff',
      'text/plain; name="a\u0000"',
    ),
  },
);

const multipartFlawArb: fc.Arbitrary<MultipartFlaw> = fc.oneof(
  fc.record({ f: fc.constant('truncateInFile' as const), at: fc.double({ min: 0, max: 1, noNaN: true }) }),
  fc.record({ f: fc.constant('truncate' as const), at: fc.double({ min: 0, max: 1, noNaN: true }) }),
  fc.constantFrom<MultipartFlaw>(
    { f: 'noClosing' },
    { f: 'wrongBoundary' },
    { f: 'noBoundaryParam' },
    { f: 'quotedBoundary' },
    { f: 'lfOnly' },
    { f: 'noDisposition' },
    { f: 'manyPartHeaders' },
    { f: 'tooManyFiles' },
    { f: 'fileOverLimit' },
    { f: 'contentOverLimit' },
    { f: 'duplicateContent' },
    { f: 'fileAsText' },
    { f: 'nulInField' },
  ),
  fc.record({ f: fc.constant('preamble' as const), text: fc.constantFrom('garbage\r\n', '--\r\n', '--fzX\r\n\r\n') }),
  fc.record({ f: fc.constant('longPartContentType' as const), length: fc.constantFrom(255, 256, 300, 2000) }),
  fc.record({ f: fc.constant('unknownField' as const), name: fc.constantFrom('admin', '__proto__', 'content[]', 'file[]', '', 'conversationId') }),
);

function multipartArb(schema: Schema): fc.Arbitrary<MultipartSpec> {
  const props = (schema.properties ?? {}) as Record<string, Schema>;
  const fileSchema = props.file ?? { type: 'array', maxItems: 10 };
  const scalarFields = Object.entries(props).filter(([name]) => name !== 'file');
  return fc.record({
    boundary: boundaryArb,
    fields: fc
      .tuple(
        ...scalarFields.map(([name, s]) =>
          fc.option(
            valid(s).map((v): [string, string] => [name, String(v)]),
            { freq: 3 },
          ),
        ),
      )
      .map((pairs) => pairs.filter((p): p is [string, string] => p !== null)),
    files: fc.array(
      fc.record({
        field: fc.constant('file'),
        filename: filenameArb.map((n): string | null => n),
        contentType: fileContentTypeArb,
        size: fc.oneof({ weight: 5, arbitrary: fc.integer({ min: 0, max: 512 }) }, { weight: 1, arbitrary: fc.integer({ min: 513, max: 16 * 1024 }) }),
        fill: fc.integer({ min: 0, max: 255 }),
      }),
      { maxLength: Math.min((fileSchema.maxItems as number | undefined) ?? 10, 3) },
    ),
    flaws: fc.oneof(
      { weight: 2, arbitrary: fc.constant<MultipartFlaw[]>([]) },
      { weight: 3, arbitrary: fc.array(multipartFlawArb, { minLength: 1, maxLength: 2 }) },
    ),
  });
}

function serialiseMultipart(spec: MultipartSpec, limits: FuzzLimits): { contentType: string; body: Buffer; notes: string[] } {
  const has = <K extends MultipartFlaw['f']>(f: K) => spec.flaws.find((x) => x.f === f) as Extract<MultipartFlaw, { f: K }> | undefined;
  const eol = has('lfOnly') ? '\n' : '\r\n';
  const fields = [...spec.fields];
  let files = [...spec.files];
  if (has('duplicateContent')) fields.push(['content', 'again'], ['content', 'and again']);
  if (has('contentOverLimit')) fields.push(['content', 'c'.repeat(10_001)]);
  const unknown = has('unknownField');
  if (unknown) fields.push([unknown.name, 'true']);
  if (has('nulInField')) fields.push(['content', 'nul\u0000inside']);
  if (has('tooManyFiles'))
    files = Array.from({ length: 11 }, (_, i) => ({ field: 'file', filename: `f${i}.txt`, contentType: 'text/plain', size: 3, fill: 65 }));
  if (has('fileOverLimit'))
    files = [...files, { field: 'file', filename: 'big.bin', contentType: 'application/octet-stream', size: limits.maxFileBytes + 1, fill: 66 }];
  if (has('fileAsText')) fields.push(['file', 'not a file']);
  const longType = has('longPartContentType');
  if (longType)
    files = [...files, { field: 'file', filename: 'typed.txt', contentType: `text/${'x'.repeat(Math.max(1, longType.length - 5))}`, size: 4, fill: 67 }];

  const chunks: Buffer[] = [];
  const preamble = has('preamble');
  if (preamble) chunks.push(Buffer.from(preamble.text));
  const dash = `--${spec.boundary}`;
  const disposition = (name: string, filename?: string | null) =>
    has('noDisposition')
      ? ''
      : `Content-Disposition: form-data; name="${name}"${filename === undefined || filename === null ? '' : `; filename="${filename}"`}${eol}`;
  const extraHeaders = has('manyPartHeaders') ? Array.from({ length: 120 }, (_, i) => `X-H${i}: v${eol}`).join('') : '';
  for (const [name, value] of fields) {
    chunks.push(Buffer.from(`${dash}${eol}${disposition(name)}${extraHeaders}${eol}${value}${eol}`, 'utf8'));
  }
  let fileStart = -1;
  let fileEnd = -1;
  for (const file of files) {
    const head = `${dash}${eol}${disposition(file.field, file.filename)}${file.contentType === null ? '' : `Content-Type: ${file.contentType}${eol}`}${eol}`;
    chunks.push(Buffer.from(head, 'utf8'));
    fileStart = chunks.reduce((n, c) => n + c.length, 0);
    chunks.push(Buffer.alloc(file.size, file.fill));
    fileEnd = fileStart + file.size;
    chunks.push(Buffer.from(eol));
  }
  if (!has('noClosing')) chunks.push(Buffer.from(`${dash}--${eol}`));
  let body = Buffer.concat(chunks);
  const notes: string[] = [];
  const inFile = has('truncateInFile');
  if (inFile && fileStart >= 0) {
    // Cut inside the last file's bytes (or right at its start when it is empty).
    const cut = fileStart + Math.floor((fileEnd - fileStart) * inFile.at);
    body = body.subarray(0, cut);
    notes.push(`cut inside the file part at byte ${cut}`);
  }
  const anywhere = has('truncate');
  if (anywhere) body = body.subarray(0, Math.floor(body.length * anywhere.at));
  const boundaryParam = has('noBoundaryParam')
    ? ''
    : has('wrongBoundary')
      ? '; boundary=fzOTHER'
      : has('quotedBoundary')
        ? `; boundary="${spec.boundary}"`
        : `; boundary=${spec.boundary}`;
  return { contentType: `multipart/form-data${boundaryParam}`, body, notes };
}

// ---------------------------------------------------------------- mutations

type Mutation =
  | { m: 'method'; to: string }
  | { m: 'pathParam'; raw: string }
  | { m: 'pathShape'; variant: string }
  | { m: 'queryAdd'; name: string; value: string }
  | { m: 'queryWrong'; at: number; value: string }
  | { m: 'queryRaw'; raw: string }
  | { m: 'header'; name: string; value: string; append: boolean }
  | { m: 'dropHeader'; name: string }
  | { m: 'jsonValue'; value: unknown }
  | { m: 'fieldWrongType'; field: string; value: unknown }
  | { m: 'dropField'; field: string }
  | { m: 'extraField'; field: string; value: unknown }
  | { m: 'bytes'; variant: string; at: number; garbage: number[] }
  | { m: 'delivery'; delivery: Delivery | { kind: 'abortAt'; at: number } };

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'PROPFIND', 'SEARCH', 'PURGE', 'LOCK', 'MKCOL', 'QUERY'];

/** Path segments that are wrong as ids, already as they go on the wire. */
const hostileSegment = fc.oneof(
  fc.constantFrom(
    '',
    '%00',
    '%',
    '%zz',
    '%C0%AF',
    '%E0%80%AF',
    '%ED%A0%80',
    '%C3%28',
    '%FF%FE',
    '%E2%80%AEconv',
    '%F0%9F%98%80',
    '..',
    '.',
    '%2e%2e',
    '%2F',
    '%252F',
    'conv_%27%20OR%20%271%27%3D%271',
    'conv_1%3BDROP%20TABLE%20messages',
    'CONV_01M82B2GBADEBBWM8EWPR7H6H9',
    'conv_01m82b2gbadebbwm8ewpr7h6h',
    'conv_01m82b2gbadebbwm8ewpr7h6h99',
    'conv_01m82b2gbadebbwm8ewpr7h6hi',
    'med_01m82b2gbadebbwm8ewpr7h6h9',
    'msg_01m82b2gbadebbwm8ewpr7h6h9',
    'ws_01m82b2gbadebbwm8ewpr7h6h9',
    'usr_01m82b2gbadebbwm8ewpr7h6h9',
    'mtk_01m82b2gbadebbwm8ewpr7h6h9',
    'message.created%3A01m82b2gbadebbwm8ewpr7h6h9',
    'message.created%3A..%2F..',
    'conv_' + 'a'.repeat(4000),
    'message.created.json.bak',
    'message.created',
    '..%2F..%2Fopenapi.yaml',
  ),
  oddString.map(pctEncode),
);

const queryNames = (op: Operation) => op.params.filter((p) => p.in === 'query').map((p) => p.name);

function mutationArb(op: Operation, limits: FuzzLimits): fc.Arbitrary<Mutation> {
  const jsonSchema = op.bodies['application/json'];
  const props = Object.keys((jsonSchema?.properties ?? {}) as Record<string, Schema>);
  const fieldNames = props.length ? props : ['content'];
  const weighted: fc.WeightedArbitrary<Mutation>[] = [
    { weight: 2, arbitrary: fc.record({ m: fc.constant('method' as const), to: fc.constantFrom(...METHODS) }) },
    { weight: 3, arbitrary: fc.record({ m: fc.constant('pathParam' as const), raw: hostileSegment }) },
    {
      weight: 2,
      arbitrary: fc.record({
        m: fc.constant('pathShape' as const),
        variant: fc.constantFrom(
          'trailingSlash',
          'doubleSlash',
          'upperCase',
          'dotSegment',
          'matrix',
          'suffix',
          'otherVersion',
          'noPrefix',
          'fragment',
          'encodedPrefix',
          'absoluteForm',
        ),
      }),
    },
    {
      weight: 3,
      arbitrary: fc.record({
        m: fc.constant('queryAdd' as const),
        name: fc.constantFrom(
          ...queryNames(op),
          'limit',
          'cursor',
          'order',
          'state',
          'expires',
          'signature',
          'unknown',
          '__proto__',
          'constructor',
          'limit[]',
          'state[$ne]',
          '',
        ),
        value: fc.oneof(
          oddString,
          fc.constantFrom(
            '0',
            '-1',
            '101',
            '1.5',
            '1e2',
            'abc',
            ' 1',
            '0x10',
            '25',
            'asc',
            'open',
            '2026-01-01T00:00:00.000Z',
            '2026-02-30T25:61:00Z',
            '99999999999999999999',
          ),
        ),
      }),
    },
    { weight: 2, arbitrary: fc.record({ m: fc.constant('queryWrong' as const), at: fc.double({ min: 0, max: 1, noNaN: true }), value: oddString }) },
    {
      weight: 2,
      arbitrary: fc.record({
        m: fc.constant('queryRaw' as const),
        raw: fc.constantFrom(
          '&&&',
          '=x',
          'a[]=1&a[]=2',
          'a[b][c]=1',
          '%',
          '%zz=1',
          'limit=%C0%AF',
          'cursor=%00',
          'limit=1&limit=2',
          'state=open&state=closed',
          'order=asc&order=desc',
          `x=${'y'.repeat(6000)}`,
          'limit',
          'cursor=',
          '%E2%80%AE=1',
          'limit=%F0%9F%98%80',
          ';limit=1',
          '+=+',
        ),
      }),
    },
    {
      weight: 4,
      arbitrary: fc.oneof(
        fc.record({
          m: fc.constant('header' as const),
          name: fc.constant('Content-Type'),
          value: fc.constantFrom(
            'text/plain',
            'application/xml',
            'application/x-www-form-urlencoded',
            'application/json; charset=utf-16',
            'application/json; charset=latin1',
            'application/json; charset=utf-8',
            'application/json;charset="UTF-8"',
            'APPLICATION/JSON',
            'application/problem+json',
            'application/merge-patch+json',
            'multipart/form-data',
            'multipart/form-data; boundary=',
            'multipart/mixed; boundary=fzX',
            `multipart/form-data; boundary=${'b'.repeat(200)}`,
            '*/*',
            '',
            'json',
            'application/json, text/plain',
            ';;;',
            'image/png',
            'application/octet-stream',
            utf8AsLatin1('application/jsön'),
          ),
          append: fc.boolean(),
        }),
        fc.record({
          m: fc.constant('header' as const),
          name: fc.constant('Idempotency-Key'),
          value: fc.oneof(
            fc.constantFrom('', ' ', '\t', 'x'.repeat(255), 'x'.repeat(256), 'a b', 'fuzz-key-1', 'fuzz-key-2', utf8AsLatin1('ключ'), '\u00ff\u00fe'),
            fc.uuid(),
          ),
          append: fc.boolean(),
        }),
        fc.record({
          m: fc.constant('header' as const),
          name: fc.constant('Authorization'),
          value: fc.constantFrom(
            'Bearer',
            'Bearer ',
            'Basic dXNlcjpwYXNz',
            'Bearer wck_',
            `Bearer wck_${'a'.repeat(5000)}`,
            'Bearer a b',
            'Token x',
            utf8AsLatin1('Bearer wck_ключ'),
            'Bearer wck_\u00ff',
            'Bearer wcm_',
            `Bearer wcm_${'a'.repeat(5000)}`,
            'Bearer wcm_\u00ff',
          ),
          append: fc.boolean(),
        }),
        fc.record({
          m: fc.constant('header' as const),
          name: fc.constant('Content-Encoding'),
          value: fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'x-unknown', 'gzip, gzip'),
          append: fc.constant(false),
        }),
        fc.record({
          m: fc.constant('header' as const),
          name: fc.constant('Accept'),
          value: fc.constantFrom('text/html', 'application/xml', '*/*', '', 'application/json;q=0'),
          append: fc.constant(false),
        }),
        fc.record({
          m: fc.constant('header' as const),
          name: fc.constant('If-None-Match'),
          value: fc.constantFrom('*', '"x"', 'W/"x"', '"' + 'f'.repeat(300) + '"', ''),
          append: fc.constant(false),
        }),
        fc.record({
          m: fc.constant('header' as const),
          name: fc.constantFrom('X-Forwarded-For', 'Forwarded', 'X-Request-Id', 'X-HTTP-Method-Override', 'Origin', 'Range'),
          value: fc.constantFrom('1.2.3.4', 'for=1.2.3.4', 'DELETE', 'https://evil.example', 'bytes=0-1', 'x'.repeat(300), utf8AsLatin1('ünïcode')),
          append: fc.constant(false),
        }),
        fc.record({
          m: fc.constant('header' as const),
          name: fc.constantFrom('Cookie', 'Sec-Fetch-Site'),
          value: fc.constantFrom(
            '__Host-session=',
            `__Host-session=${'A'.repeat(43)}`,
            '__Host-session=a; __Host-session=b',
            `__Host-session=${'x'.repeat(5000)}`,
            'same-origin',
            'same-site',
            'cross-site',
            'none',
            utf8AsLatin1('sämé-origin'),
          ),
          append: fc.boolean(),
        }),
        // Only 100-continue: any other expectation is answered 417 by node:http before the app runs.
        fc.constant<Mutation>({ m: 'header', name: 'Expect', value: '100-continue', append: false }),
      ),
    },
    { weight: 1, arbitrary: fc.record({ m: fc.constant('dropHeader' as const), name: fc.constantFrom('Content-Type', 'Authorization', 'Idempotency-Key') }) },
    {
      weight: 3,
      arbitrary: fc.record({
        m: fc.constant('jsonValue' as const),
        value: fc.oneof(
          fc.constantFrom<unknown>(
            null,
            [],
            {},
            'hello',
            42,
            true,
            [{ content: 'x' }],
            { content: '' },
            { content: ' ' },
            { content: 'x'.repeat(10_000) },
            { content: 'x'.repeat(10_001) },
            { content: '😀'.repeat(10_000) },
          ),
          jsonSchema ? valid(jsonSchema) : fc.constant({}),
          fc.jsonValue({ maxDepth: 3 }),
        ),
      }),
    },
    {
      weight: 3,
      arbitrary: fc.record({
        m: fc.constant('fieldWrongType' as const),
        field: fc.constantFrom(...fieldNames),
        value: jsonSchema
          ? fc.constantFrom(...fieldNames).chain((f) => wrongType(((jsonSchema.properties as Record<string, Schema>) ?? {})[f] ?? {}))
          : oddString,
      }),
    },
    { weight: 1, arbitrary: fc.record({ m: fc.constant('dropField' as const), field: fc.constantFrom(...fieldNames) }) },
    {
      weight: 1,
      arbitrary: fc.record({
        m: fc.constant('extraField' as const),
        field: fc.constantFrom('admin', 'id', 'conversationId', 'apiKeyId', 'origin', 'attachments', ''),
        value: fc.oneof(oddString, fc.constant(true)),
      }),
    },
    {
      weight: 3,
      arbitrary: fc.record({
        m: fc.constant('bytes' as const),
        variant: fc.constantFrom(
          'truncate',
          'invalidUtf8',
          'overlong',
          'surrogate',
          'utf16',
          'utf8Bom',
          'nul',
          'empty',
          'garbage',
          'overJsonLimit',
          'deepNesting',
          'protoPollution',
          'duplicateKeys',
          'rawControl',
          'lotsOfEscapes',
        ),
        at: fc.double({ min: 0, max: 1, noNaN: true }),
        garbage: fc.array(fc.integer({ min: 0, max: 255 }), { maxLength: 64 }),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        m: fc.constant('delivery' as const),
        delivery: fc.oneof(
          fc.record({ kind: fc.constant('chunked' as const), pieces: fc.integer({ min: 1, max: 5 }) }),
          fc.record({ kind: fc.constant('abortAt' as const), at: fc.double({ min: 0, max: 0.999, noNaN: true }) }),
        ),
      }),
    },
  ];
  void limits;
  return fc.oneof(...weighted);
}

// ---------------------------------------------------------------- building

interface Draft {
  method: string;
  template: string;
  pathParams: Record<string, string>;
  pathShape: string[];
  query: [string, string][];
  rawQuery: string[];
  headers: [string, string][];
  /** The JSON value of the body while it is still JSON (field mutations work on it). */
  json: unknown;
  hasJson: boolean;
  body: Buffer | null;
  delivery: Delivery | { kind: 'abortAt'; at: number };
  recipe: string[];
}

const setHeader = (d: Draft, name: string, value: string) => {
  d.headers = d.headers.filter(([n]) => n.toLowerCase() !== name.toLowerCase());
  d.headers.push([name, value]);
};

function materialiseJson(d: Draft) {
  if (d.hasJson) {
    d.body = Buffer.from(JSON.stringify(d.json) ?? 'null', 'utf8');
    d.hasJson = false;
  }
}

function applyMutation(d: Draft, mu: Mutation, op: Operation) {
  switch (mu.m) {
    case 'method':
      d.method = mu.to;
      d.recipe.push(`method ${mu.to}`);
      return;
    case 'pathParam': {
      const names = Object.keys(d.pathParams);
      if (names.length) d.pathParams[names[0]] = mu.raw;
      else d.pathShape.push(`segment:${mu.raw}`);
      d.recipe.push(`path id ${JSON.stringify(mu.raw.slice(0, 60))}`);
      return;
    }
    case 'pathShape':
      d.pathShape.push(mu.variant);
      d.recipe.push(`path ${mu.variant}`);
      return;
    case 'queryAdd':
      d.query.push([mu.name, mu.value]);
      d.recipe.push(`query +${mu.name}`);
      return;
    case 'queryWrong':
      if (d.query.length) {
        const i = Math.min(d.query.length - 1, Math.floor(mu.at * d.query.length));
        d.query[i] = [d.query[i][0], mu.value]; // a new pair: the generated value stays as fast-check made it
      } else d.query.push([queryNames(op)[0] ?? 'limit', mu.value]);
      d.recipe.push('query wrong value');
      return;
    case 'queryRaw':
      d.rawQuery.push(mu.raw);
      d.recipe.push(`query raw ${JSON.stringify(mu.raw.slice(0, 40))}`);
      return;
    case 'header':
      if (mu.append) d.headers.push([mu.name, mu.value]);
      else setHeader(d, mu.name, mu.value);
      d.recipe.push(`header ${mu.name}${mu.append ? ' (again)' : ''}: ${JSON.stringify(mu.value.slice(0, 60))}`);
      return;
    case 'dropHeader':
      d.headers = d.headers.filter(([n]) => n.toLowerCase() !== mu.name.toLowerCase());
      d.recipe.push(`no ${mu.name}`);
      return;
    case 'jsonValue':
      d.json = mu.value;
      d.hasJson = true;
      if (!d.headers.some(([n]) => n.toLowerCase() === 'content-type')) d.headers.push(['Content-Type', 'application/json']);
      d.recipe.push('JSON body replaced');
      return;
    case 'fieldWrongType':
    case 'dropField':
    case 'extraField':
      if (d.hasJson && d.json && typeof d.json === 'object' && !Array.isArray(d.json)) {
        const obj = { ...(d.json as Record<string, unknown>) };
        if (mu.m === 'dropField') delete obj[mu.field];
        else obj[mu.field] = mu.value;
        d.json = obj;
        d.recipe.push(`${mu.m} ${mu.field}`);
      }
      return;
    case 'bytes':
      materialiseJson(d);
      d.body = mutateBytes(d.body ?? Buffer.alloc(0), mu);
      if (mu.variant === 'utf16' && d.headers.some(([n, v]) => n.toLowerCase() === 'content-type' && v.startsWith('application/json')) && mu.at > 0.5) {
        setHeader(d, 'Content-Type', 'application/json; charset=utf-16');
      }
      d.recipe.push(`bytes ${mu.variant}`);
      return;
    case 'delivery':
      d.delivery = mu.delivery;
      d.recipe.push(`delivery ${mu.delivery.kind}`);
      return;
  }
}

function mutateBytes(body: Buffer, mu: Extract<Mutation, { m: 'bytes' }>): Buffer {
  const at = Math.floor(body.length * mu.at);
  const insert = (bytes: number[] | Buffer) => Buffer.concat([body.subarray(0, at), Buffer.from(bytes), body.subarray(at)]);
  switch (mu.variant) {
    case 'truncate':
      return body.subarray(0, at);
    case 'invalidUtf8':
      return insert([0xc3, 0x28, 0xff]);
    case 'overlong':
      return insert([0xc0, 0xaf, 0xe0, 0x80, 0xaf]);
    case 'surrogate':
      return insert([0xed, 0xa0, 0x80]);
    case 'utf16':
      return Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(body.toString('utf8'), 'utf16le')]);
    case 'utf8Bom':
      return Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), body]);
    case 'nul':
      return insert([0]);
    case 'empty':
      return Buffer.alloc(0);
    case 'garbage':
      return Buffer.from(mu.garbage);
    case 'overJsonLimit':
      return Buffer.from(JSON.stringify({ content: 'x'.repeat(JSON_LIMIT) }));
    case 'deepNesting': {
      const depth = 1000 + Math.floor(mu.at * 20_000);
      return Buffer.from('['.repeat(depth) + ']'.repeat(depth));
    }
    case 'protoPollution':
      return Buffer.from('{"content":"x","__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}');
    case 'duplicateKeys':
      return Buffer.from('{"content":"x","content":{"$gt":""}}');
    case 'rawControl':
      return Buffer.from('{"content":"a\u0001\u0000\nb"}');
    case 'lotsOfEscapes':
      return Buffer.from(JSON.stringify({ content: '\\u0000'.repeat(Math.floor(mu.at * 1500)) + '\ud800\udc00\ud800' }));
    default:
      return body;
  }
}

function buildTarget(d: Draft, basePath: string): string {
  let path = d.template.replace(/\{([^}]+)\}/g, (_, name: string) => d.pathParams[name] ?? '');
  let prefix = basePath;
  let fragment = '';
  for (const shape of d.pathShape) {
    if (shape.startsWith('segment:')) path += `/${shape.slice('segment:'.length)}`;
    else if (shape === 'trailingSlash') path += '/';
    else if (shape === 'doubleSlash') path = path.replace('/', '//');
    else if (shape === 'upperCase') path = path.toUpperCase();
    else if (shape === 'dotSegment') path = `/x/..${path}`;
    else if (shape === 'matrix') path += ';jsessionid=1';
    else if (shape === 'suffix') path += '/extra';
    else if (shape === 'otherVersion') prefix = '/api/v2';
    else if (shape === 'noPrefix') prefix = '';
    else if (shape === 'fragment') fragment = '#frag';
    else if (shape === 'encodedPrefix') prefix = '/api%2Fv1';
    else if (shape === 'absoluteForm') prefix = `https://localhost${basePath}`;
  }
  const pairs = d.query.map(([k, v]) => `${pctEncode(k)}=${pctEncode(v)}`);
  const query = [...pairs, ...d.rawQuery].join('&');
  return `${prefix}${path}${query ? `?${query}` : ''}${fragment}`;
}

// ---------------------------------------------------------------- per operation

/** Credentials as they go on the wire (an Authorization header, a cookie and its Fetch Metadata, or nothing). */
export interface Credential {
  label: string;
  headers: [string, string][];
}

/** A signed link or the like: path and query taken together, replacing the generated ones. */
export interface Link {
  pathParams: Record<string, string>;
  query: [string, string][];
  label: string;
}

/**
 * What the generators know of one document's world: which credentials exist, and the real ids,
 * cursors and bodies that reach its handlers. Every hook may answer undefined: the schema's value.
 */
export interface FuzzDomain {
  credential(op: Operation): fc.Arbitrary<Credential>;
  /** A path parameter as it goes on the wire. */
  pathParam?(op: Operation, param: Parameter): fc.Arbitrary<string> | undefined;
  /** A query or header parameter's value. */
  paramValue?(op: Operation, param: Parameter): fc.Arbitrary<string> | undefined;
  /** A JSON body the handler can act on, in place of the schema's (mixed in with it). */
  jsonBody?(op: Operation): fc.Arbitrary<unknown> | undefined;
  link?(op: Operation): fc.Arbitrary<Link> | undefined;
}

/** A path parameter from the schema, now and then an odd string. */
const schemaSegment = (p: Parameter) =>
  fc.oneof({ weight: 5, arbitrary: valid(p.schema).map((v) => pctEncode(String(v))) }, { weight: 1, arbitrary: oddString.map(pctEncode) });

interface Parts {
  auth: Credential;
  pathParams: Record<string, string>;
  query: [string, string][];
  headers: [string, string][];
  body: { contentType: string; bytes: Buffer | null; json?: unknown; multipart?: MultipartSpec } | null;
  mutations: Mutation[];
  link: Link | null;
}

function operationArb(op: Operation, domain: FuzzDomain, basePath: string, limits: FuzzLimits): fc.Arbitrary<FuzzCase> {
  const pathParams = op.params.filter((p) => p.in === 'path');
  const queryParams = op.params.filter((p) => p.in === 'query');
  const headerParams = op.params.filter((p) => p.in === 'header');
  const linkArb = domain.link?.(op);

  const pathArb = fc.record(
    Object.fromEntries(pathParams.map((p) => [p.name, domain.pathParam?.(op, p) ?? schemaSegment(p)])) as Record<string, fc.Arbitrary<string>>,
  );

  const paramArb = (p: Parameter) =>
    domain.paramValue?.(op, p) ??
    (p.name.toLowerCase() === 'idempotency-key'
      ? fc.oneof(valid(p.schema).map(String), fc.constantFrom('fuzz-key-1', 'fuzz-key-2', 'fuzz-key-3'), fc.uuid())
      : valid(p.schema).map(String));
  const someOf = (params: Parameter[]) =>
    fc
      .tuple(
        ...params.map((p) =>
          fc.option(
            paramArb(p).map((v): [string, string] => [p.name, v]),
            { freq: 2 },
          ),
        ),
      )
      .map((pairs) => pairs.filter((p): p is [string, string] => p !== null));
  // With a link the query is the link's.
  const queryArb = linkArb ? fc.constant<[string, string][]>([]) : someOf(queryParams);
  const headersArb = someOf(headerParams);

  const bodyChoices: fc.Arbitrary<Parts['body']>[] = [];
  for (const [type, schema] of Object.entries(op.bodies)) {
    if (type === 'application/json') {
      const domainJson = domain.jsonBody?.(op);
      const json = domainJson ? fc.oneof(valid(schema), domainJson) : valid(schema);
      bodyChoices.push(json.map((value) => ({ contentType: type, bytes: null, json: value })));
    } else if (type === 'multipart/form-data') bodyChoices.push(multipartArb(schema).map((multipart) => ({ contentType: type, bytes: null, multipart })));
  }
  const bodyArb: fc.Arbitrary<Parts['body']> = bodyChoices.length ? fc.oneof(...bodyChoices) : fc.constant(null);

  const mutationsArb = fc.oneof(
    { weight: 2, arbitrary: fc.constant([] as Mutation[]) },
    { weight: 5, arbitrary: fc.array(mutationArb(op, limits), { minLength: 1, maxLength: 3 }) },
  );

  return fc
    .record({
      auth: domain.credential(op),
      pathParams: pathArb,
      query: queryArb,
      headers: headersArb,
      body: bodyArb,
      mutations: mutationsArb,
      link: linkArb ?? fc.constant(null),
    })
    .map((parts: Parts) => buildCase(op, parts, basePath, limits));
}

function buildCase(op: Operation, parts: Parts, basePath: string, limits: FuzzLimits): FuzzCase {
  const d: Draft = {
    method: op.method,
    template: op.template,
    pathParams: { ...parts.pathParams }, // already as they go on the wire
    pathShape: [],
    query: [...parts.query],
    rawQuery: [],
    // Header values travel as UTF-8 bytes; controls are not HTTP at all (node:http refuses to send them).
    headers: [...parts.headers.map(([n, v]): [string, string] => [n, utf8AsLatin1(v).replace(/[\x00-\x08\x0a-\x1f\x7f]/g, '')])],
    json: undefined,
    hasJson: false,
    body: null,
    delivery: { kind: 'whole' },
    recipe: [op.operationId, parts.auth.label],
  };
  if (parts.link) {
    Object.assign(d.pathParams, parts.link.pathParams);
    d.query = [...parts.link.query];
    d.recipe.push(parts.link.label);
  }
  d.headers.push(...parts.auth.headers);
  if (parts.body?.multipart) {
    const m = serialiseMultipart(parts.body.multipart, limits);
    d.body = m.body;
    d.headers.push(['Content-Type', m.contentType]);
    d.recipe.push(`multipart: ${parts.body.multipart.files.length} file(s), flaws ${JSON.stringify(parts.body.multipart.flaws)}`, ...m.notes);
  } else if (parts.body) {
    d.json = parts.body.json;
    d.hasJson = true;
    d.headers.push(['Content-Type', parts.body.contentType]);
    d.recipe.push('JSON body');
  }
  for (const mu of parts.mutations) applyMutation(d, mu, op);
  materialiseJson(d);
  let delivery: Delivery;
  if (d.delivery.kind === 'abortAt') {
    const size = d.body?.length ?? 0;
    delivery = { kind: 'abort', sendBytes: Math.floor(size * d.delivery.at) };
    if (d.body === null) d.body = Buffer.alloc(0);
  } else delivery = d.delivery;
  return {
    operationId: op.operationId,
    recipe: d.recipe,
    method: d.method,
    target: buildTarget(d, basePath),
    headers: d.headers,
    body: d.body,
    delivery,
  };
}

/** Every operation, equally likely, each with its own generators. */
export function requestArb(operations: Operation[], domain: FuzzDomain, basePath: string, limits: FuzzLimits): fc.Arbitrary<FuzzCase> {
  return fc
    .oneof(...operations.map((op) => operationArb(op, domain, basePath, limits)))
    .map((c) => Object.assign(c, { [fc.toStringMethod]: () => describeCase(c) }));
}

const preview = (buf: Buffer | null, max = 400) => {
  if (!buf) return '(no body)';
  const text = JSON.stringify(buf.subarray(0, max).toString('latin1'));
  return `${buf.length} bytes: ${text}${buf.length > max ? ' ...' : ''}`;
};

/** The request as it went out, readable (the body is shown as latin1, one character a byte). */
export function describeCase(c: FuzzCase): string {
  const headers = c.headers.map(([n, v]) => `${n}: ${JSON.stringify(v.length > 200 ? `${v.slice(0, 200)}...(${v.length} chars)` : v)}`).join('\n  ');
  return [
    `[${c.recipe.join('; ')}]`,
    `${c.method} ${c.target.length > 300 ? `${c.target.slice(0, 300)}...(${c.target.length} chars)` : c.target}`,
    `  ${headers}`,
    `  body ${preview(c.body)}`,
    `  delivery ${JSON.stringify(c.delivery)}`,
  ].join('\n');
}
