/**
 * The SDK's sources as its build ships them (tsc emits them as written; sdk/scripts/build.mjs
 * rewrites nothing): relative imports name the `.js` file, which Node's ES module loader needs,
 * and the client keeps no state at module level (two clients in one process share nothing).
 */
import fs from 'node:fs';
import path from 'node:path';

const src = path.join(__dirname, '../../sdk/src');

function sources(dir = src): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) return sources(file);
    return entry.name.endsWith('.ts') ? [file] : [];
  });
}

test('every relative import in sdk/src names an existing module by its .js name', () => {
  const wrong: string[] = [];
  for (const file of sources()) {
    const code = fs.readFileSync(file, 'utf8');
    for (const [, specifier] of code.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)['"](\.{1,2}\/[^'"]*)['"]/g)) {
      const target = path.resolve(path.dirname(file), specifier.replace(/\.js$/, '.ts'));
      if (!specifier.endsWith('.js') || !fs.existsSync(target)) wrong.push(`${path.relative(src, file)}: ${specifier}`);
    }
  }
  expect(wrong).toEqual([]);
});

test('no module of sdk/src holds mutable state at the top level, except the documented replay store', () => {
  // webhooks.ts: the default replay store and the ids running in this process are the replay
  // protection of the process, on purpose (sdk/README.md, "Replays and retries"). validate.ts:
  // the event validators are compiled once, on first use, from constant schemas.
  const allowed = ['validate.ts: let validators', 'webhooks.ts: const defaultReplayStore', 'webhooks.ts: const runningHere'];
  const found: string[] = [];
  for (const file of sources()) {
    const code = fs.readFileSync(file, 'utf8');
    for (const [, kind, name] of code.matchAll(
      /^(?:export )?(let|var|const) (\w+)(?::[^=\n]+)? = (?:\/\*[^*]*\*\/ )?new (?:Map|Set|WeakMap|WeakSet|\w*Store)\b/gm,
    )) {
      found.push(`${path.relative(src, file)}: ${kind} ${name}`);
    }
    for (const [, kind, name] of code.matchAll(/^(?:export )?(let|var) (\w+)/gm)) found.push(`${path.relative(src, file)}: ${kind} ${name}`);
  }
  expect([...new Set(found)].sort()).toEqual(allowed);
});
