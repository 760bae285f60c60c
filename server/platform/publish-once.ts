import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';

/**
 * Makes a file that several processes starting at once may all try to make (the master key), so
 * that every one of them ends with the same bytes and none reads a half-written file: each writes a
 * private copy and links it into place, which fails for all but the first; the rest read the winner's.
 * Returns what the file holds.
 */
export function publishFileOnce(file: string, content: string, mode = 0o600): string {
  const existing = readIfPresent(file);
  if (existing !== undefined) return existing;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const draft = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  fs.writeFileSync(draft, content, { mode, flag: 'wx' });
  try {
    fs.linkSync(draft, file);
    return content;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return fs.readFileSync(file, 'utf8');
  } finally {
    fs.rmSync(draft, { force: true });
  }
}

/**
 * The same for a set of files that belong together (a certificate and its key): they are written
 * into a private directory that is renamed into place whole, so no process ever sees one file of
 * one pair beside the other file of another. Returns the directory's files as they are.
 */
export function publishDirectoryOnce(dir: string, files: Record<string, { content: string; mode?: number }>): Record<string, string> {
  const names = Object.keys(files);
  const existing = readAll(dir, names);
  if (existing) return existing;
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  const draft = `${dir}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  fs.mkdirSync(draft, { mode: 0o700 });
  try {
    for (const name of names) fs.writeFileSync(path.join(draft, name), files[name].content, { mode: files[name].mode ?? 0o644, flag: 'wx' });
    try {
      // rename(2) replaces an empty directory and refuses a non-empty one: the first complete set wins.
      fs.renameSync(draft, dir);
      return Object.fromEntries(names.map((n) => [n, files[n].content]));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
      const theirs = readAll(dir, names);
      if (!theirs) throw new Error(`${dir} holds other files than ${names.join(', ')}; move them away and start again`);
      return theirs;
    }
  } finally {
    fs.rmSync(draft, { recursive: true, force: true });
  }
}

function readIfPresent(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

function readAll(dir: string, names: string[]): Record<string, string> | undefined {
  const out: Record<string, string> = {};
  for (const name of names) {
    const text = readIfPresent(path.join(dir, name));
    if (text === undefined) return undefined;
    out[name] = text;
  }
  return out;
}
