import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { deriveKey } from './crypto';

/**
 * The master key encrypts webhook signing secrets and signs media links and cursors.
 * From MASTER_KEY (64 hex characters or base64 of 32 bytes), else generated once into
 * DATA_DIR/master.key with mode 0600. Every instance of one deployment needs the same key.
 */
export function loadMasterKey(dataDir: string, fromEnv: string | undefined): Buffer {
  if (fromEnv) return parseKey(fromEnv, 'MASTER_KEY');
  const file = path.join(dataDir, 'master.key');
  if (fs.existsSync(file)) return parseKey(fs.readFileSync(file, 'utf8').trim(), file);
  fs.mkdirSync(dataDir, { recursive: true });
  const key = randomBytes(32);
  try {
    fs.writeFileSync(file, key.toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
    return key;
  } catch (err) {
    // Another process created it between our check and our write: use theirs.
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return parseKey(fs.readFileSync(file, 'utf8').trim(), file);
    throw err;
  }
}

function parseKey(text: string, source: string): Buffer {
  const buf = /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64');
  if (buf.length !== 32) throw new Error(`${source}: the master key must be 32 bytes (64 hex characters or base64)`);
  return buf;
}

export interface Keys {
  mediaLinks: Buffer;
  cursors: Buffer;
  webhookSecrets: Buffer;
}

export function deriveKeys(master: Buffer): Keys {
  return {
    mediaLinks: deriveKey(master, 'media-links'),
    cursors: deriveKey(master, 'cursors'),
    webhookSecrets: deriveKey(master, 'webhook-secrets'),
  };
}
