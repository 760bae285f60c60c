import { execFileSync } from 'node:child_process';
import path from 'node:path';
import fs from 'node:fs';
import os from 'node:os';

const root = path.resolve(__dirname, '../..');

test('generated files are up to date with openapi/openapi.yaml', () => {
  // Throws (non-zero exit) and names the stale file when someone edits the document without
  // running `npm run generate`, or edits a generated file by hand.
  const out = execFileSync(path.join(root, 'node_modules/.bin/tsx'), [path.join(root, 'scripts/generate.ts'), '--check'], { cwd: root, encoding: 'utf8' });
  expect(out).toMatch(/up to date/);
});

test('the check notices a hand edit', () => {
  const copy = fs.mkdtempSync(path.join(os.tmpdir(), 'gen-check-'));
  try {
    for (const dir of ['openapi', 'scripts', 'server/generated', 'sdk/src/generated', 'sdk/schemas']) {
      fs.cpSync(path.join(root, dir), path.join(copy, dir), { recursive: true });
    }
    fs.symlinkSync(path.join(root, 'node_modules'), path.join(copy, 'node_modules'));
    fs.appendFileSync(path.join(copy, 'sdk/schemas/message.created.json'), ' ');
    let failed = false;
    try {
      execFileSync(path.join(root, 'node_modules/.bin/tsx'), [path.join(copy, 'scripts/generate.ts'), '--check'], { cwd: copy, stdio: 'pipe' });
    } catch (err) {
      failed = true;
      expect(String((err as { stderr: Buffer }).stderr)).toContain('stale: sdk/schemas/message.created.json');
    }
    expect(failed).toBe(true);
  } finally {
    fs.rmSync(copy, { recursive: true, force: true });
  }
});

test('the document lints clean with Spectral (spectral:oas)', () => {
  const out = execFileSync(path.join(root, 'node_modules/.bin/spectral'), ['lint', '--fail-severity=warn', '--ruleset', 'openapi/.spectral.yaml', 'openapi/openapi.yaml'], { cwd: root, encoding: 'utf8' });
  expect(out).toMatch(/No results/);
});
