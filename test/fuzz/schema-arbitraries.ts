import fc from 'fast-check';
import type { Schema } from './operations';

/**
 * fast-check arbitraries from the document's JSON Schemas: `valid(schema)` produces values the
 * schema accepts (strings short, so a run stays fast; the length limits themselves are hit by the
 * mutations), `wrongType(schema)` a value of another JSON type.
 */

const STRING_CAP = 48;

function typesOf(schema: Schema): string[] {
  if (Array.isArray(schema.type)) return schema.type as string[];
  if (typeof schema.type === 'string') return [schema.type];
  if (schema.properties) return ['object'];
  if (schema.items) return ['array'];
  return [];
}

function mergeAllOf(schema: Schema): Schema {
  const { allOf, ...rest } = schema;
  return (allOf as Schema[]).reduce<Schema>((acc, part) => ({ ...acc, ...part }), rest);
}

const isoDate = fc
  .date({ min: new Date('1970-01-01T00:00:00.000Z'), max: new Date('2100-01-01T00:00:00.000Z'), noInvalidDate: true })
  .map((d) => d.toISOString());

export function valid(schema: Schema): fc.Arbitrary<unknown> {
  if ('const' in schema) return fc.constant(schema.const);
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
  if (Array.isArray(schema.allOf)) return valid(mergeAllOf(schema));
  const alternatives = (schema.anyOf ?? schema.oneOf) as Schema[] | undefined;
  if (alternatives) return fc.oneof(...alternatives.map(valid));
  const types = typesOf(schema);
  if (types.length > 1) return fc.oneof(...types.map((type) => valid({ ...schema, type })));
  switch (types[0]) {
    case 'null':
      return fc.constant(null);
    case 'boolean':
      return fc.boolean();
    case 'integer':
      return fc.integer({ min: (schema.minimum as number | undefined) ?? -1e9, max: (schema.maximum as number | undefined) ?? 1e9 });
    case 'number':
      return fc.double({ min: (schema.minimum as number | undefined) ?? -1e9, max: (schema.maximum as number | undefined) ?? 1e9, noNaN: true });
    case 'array': {
      const maxItems = Math.min((schema.maxItems as number | undefined) ?? 3, 3);
      return fc.array(valid((schema.items as Schema) ?? {}), {
        minLength: Math.min((schema.minItems as number | undefined) ?? 0, maxItems),
        maxLength: maxItems,
      });
    }
    case 'object': {
      const properties = (schema.properties ?? {}) as Record<string, Schema>;
      const required = (schema.required as string[] | undefined) ?? [];
      return fc.record(Object.fromEntries(Object.entries(properties).map(([k, s]) => [k, valid(s)])), {
        requiredKeys: required.filter((k) => k in properties),
      });
    }
    case 'string':
    default:
      return validString(schema);
  }
}

function validString(schema: Schema): fc.Arbitrary<string> {
  const minLength = (schema.minLength as number | undefined) ?? 0;
  const maxLength = Math.max(minLength, Math.min((schema.maxLength as number | undefined) ?? STRING_CAP, STRING_CAP));
  if (schema.format === 'date-time') return isoDate;
  if (schema.format === 'email') return fc.emailAddress({ size: 'xsmall' }).filter((s) => s.length >= minLength && s.length <= maxLength);
  if (typeof schema.pattern === 'string') {
    // An open repetition (`+`, `*`) at the end yields short strings: give it the length bounds, or
    // a minimum length above what it makes would filter forever.
    const pattern = minLength > 1 ? schema.pattern.replace(/(\]|\.)[+*]\$$/, `$1{${minLength},${maxLength}}$`) : schema.pattern;
    return fc
      .stringMatching(new RegExp(pattern), { size: 'xsmall' })
      .filter((s) => s.length >= minLength && s.length <= ((schema.maxLength as number | undefined) ?? Infinity));
  }
  return fc.string({
    unit: fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...'abcXYZ019 -_.'.split('')) }, { weight: 1, arbitrary: oddCharacter }),
    minLength,
    maxLength,
  });
}

/**
 * Characters that break naive handling: NUL and controls, RTL and zero-width marks, a BOM, a lone
 * surrogate (not valid Unicode; JSON can still carry it escaped), emoji beyond the BMP (MySQL's
 * 3-byte utf8 cannot store them), combining marks, quotes and backslashes.
 */
export const oddCharacter = fc.constantFrom(
  '\u0000',
  '\u0001',
  '\u001f',
  '\u007f',
  '\t',
  '\n',
  '\r',
  '\u0085',
  '\u00a0',
  '\u00ff',
  '\u202e',
  '\u202d',
  '\u200b',
  '\u200f',
  '\u2028',
  '\u2029',
  '\ufeff',
  '\ufffd',
  '\uffff',
  '\ud800',
  '\udfff',
  '😀',
  '👩‍👩‍👧',
  '𝕏',
  'é',
  'é',
  'ß',
  'ﬀ',
  'İ',
  '中',
  '\u0301',
  '"',
  "'",
  '\\',
  '/',
  '<',
  '>',
  '&',
  '%',
  '$',
  '{',
  '}',
  '`',
  ';',
);

/** Strings that are hostile as values anywhere: injections, odd Unicode, boundary lengths. */
export const oddString: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    "' OR '1'='1",
    '1; DROP TABLE messages; --',
    '${jndi:ldap://127.0.0.1/x}',
    '<script>alert(1)</script>',
    '../../../../etc/passwd',
    '__proto__',
    'constructor',
    '{"$gt":""}',
    'null',
    'undefined',
    'NaN',
    '-0',
    '1e309',
    '\u202egnp.exe',
    'a\u0000b',
    '\ud83d',
    '😀'.repeat(40),
  ),
  fc.string({ unit: oddCharacter, minLength: 1, maxLength: 12 }),
  // Any code point, lone surrogates included (a custom unit: fast-check's 'binary' unit costs seconds to set up).
  fc.string({ unit: fc.integer({ min: 0, max: 0x10ffff }).map((cp) => String.fromCodePoint(cp)), maxLength: 24 }),
  fc.integer({ min: 0, max: 3 }).map((i) => 'x'.repeat([255, 256, 1024, 1025][i])),
);

/** A value of a JSON type the schema does not take. */
export function wrongType(schema: Schema): fc.Arbitrary<unknown> {
  const types = typesOf(schema);
  const all: [string, fc.Arbitrary<unknown>][] = [
    ['string', oddString],
    ['integer', fc.oneof(fc.integer(), fc.constantFrom(Number.MAX_SAFE_INTEGER + 2, -1, 0))],
    ['number', fc.constantFrom(1.5, -0.0001, 1e300)],
    ['boolean', fc.boolean()],
    ['null', fc.constant(null)],
    ['array', fc.array(fc.oneof(fc.integer(), oddString), { maxLength: 3 })],
    ['object', fc.constantFrom<unknown>({}, { $ne: null }, { content: 'x' }, { constructor: { prototype: { polluted: true } } })],
  ];
  const others = all.filter(([t]) => !types.includes(t) && !(t === 'number' && types.includes('integer')) && !(t === 'integer' && types.includes('number')));
  return fc.oneof(...others.map(([, a]) => a));
}
