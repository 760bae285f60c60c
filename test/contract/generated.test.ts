import { execFileSync } from 'node:child_process';
import path from 'node:path';
import fs from 'node:fs';
import os from 'node:os';
import YAML from 'yaml';
import { DOCUMENTS } from '../../scripts/lib/documents';

const root = path.resolve(__dirname, '../..');

test('generated files are up to date with the documents (every document in scripts/lib/documents.ts)', () => {
  // Throws (non-zero exit) and names the stale file when someone edits the document without
  // running `npm run generate`, or edits a generated file by hand.
  const out = execFileSync(path.join(root, 'node_modules/.bin/tsx'), [path.join(root, 'scripts/generate.ts'), '--check'], { cwd: root, encoding: 'utf8' });
  expect(out).toMatch(/up to date/);
});

test('the check notices a hand edit, in the files of either document', () => {
  const copy = fs.mkdtempSync(path.join(os.tmpdir(), 'gen-check-'));
  try {
    for (const dir of ['openapi', 'scripts', 'sdk/src', 'sdk/schemas', ...DOCUMENTS.map((d) => path.dirname(d.types))]) {
      fs.cpSync(path.join(root, dir), path.join(copy, dir), { recursive: true });
    }
    fs.symlinkSync(path.join(root, 'node_modules'), path.join(copy, 'node_modules'));
    fs.appendFileSync(path.join(copy, 'sdk/schemas/message.created.json'), ' ');
    fs.appendFileSync(path.join(copy, 'server/window/generated/api.ts'), '// edited\n');
    let failed = false;
    try {
      execFileSync(path.join(root, 'node_modules/.bin/tsx'), [path.join(copy, 'scripts/generate.ts'), '--check'], { cwd: copy, stdio: 'pipe' });
    } catch (err) {
      failed = true;
      const stderr = String((err as { stderr: Buffer }).stderr);
      expect(stderr).toContain('stale: sdk/schemas/message.created.json');
      expect(stderr).toContain('stale: server/window/generated/api.ts');
      expect(stderr).not.toContain('stale: sdk/src/generated/api.ts');
      expect(stderr.match(/^stale: /gm)).toHaveLength(2);
    }
    expect(failed).toBe(true);
  } finally {
    fs.rmSync(copy, { recursive: true, force: true });
  }
});

const spectral = (cwd: string) =>
  execFileSync(
    path.join(root, 'node_modules/.bin/spectral'),
    ['lint', '--fail-severity=warn', '--ruleset', 'openapi/.spectral.yaml', 'openapi/openapi.yaml', 'openapi/window.yaml', 'openapi/manage.yaml'],
    { cwd, encoding: 'utf8', stdio: 'pipe' },
  );

test('the documents (public API, chat window, management API) lint clean with Spectral (spectral:oas and the OWASP API Security ruleset)', () => {
  // Both rulesets stay in: dropping one would make this test pass on anything. Prism's proxy
  // (prism-proxy.test.ts) passes everything silently when the document is invalid, so this is its guard too.
  const ruleset = YAML.parse(fs.readFileSync(path.join(root, 'openapi/.spectral.yaml'), 'utf8'));
  expect(ruleset.extends).toEqual(expect.arrayContaining(['spectral:oas', '@stoplight/spectral-owasp-ruleset']));
  expect(spectral(root)).toMatch(/No results/);
});

test('the lint fails on an unbounded string and on an answer without rate-limit headers', () => {
  const copy = fs.mkdtempSync(path.join(os.tmpdir(), 'lint-check-'));
  try {
    fs.cpSync(path.join(root, 'openapi'), path.join(copy, 'openapi'), { recursive: true });
    fs.symlinkSync(path.join(root, 'node_modules'), path.join(copy, 'node_modules'));
    const file = path.join(copy, 'openapi/openapi.yaml');
    const doc = fs.readFileSync(file, 'utf8');
    const unbounded = doc.replace(/(    ReplyRequest:[\s\S]*?content:\n\s+type: string\n\s+minLength: 1\n)\s+maxLength: 10000\n/, '$1');
    const withoutHeaders = unbounded.replace(/(  \/conversations:\n[\s\S]*?'200':[\s\S]*?X-Request-Id: .*\n)(\s+X-RateLimit-\w+: .*\n){3}/, '$1');
    expect(unbounded).not.toBe(doc);
    expect(withoutHeaders).not.toBe(unbounded);
    fs.writeFileSync(file, withoutHeaders);
    let output = '';
    try {
      spectral(copy);
    } catch (err) {
      output = String((err as { stdout: string }).stdout);
    }
    expect(output).toMatch(/owasp:api4:2023-string-limit .*components\.schemas\.ReplyRequest\.properties\.content/);
    expect(output).toMatch(/owasp:api4:2023-rate-limit .*paths\.\/conversations\.get\.responses\[200\]/);
  } finally {
    fs.rmSync(copy, { recursive: true, force: true });
  }
});
