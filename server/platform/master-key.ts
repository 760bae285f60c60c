import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { deriveKey } from './crypto';
import { publishFileOnce } from './publish-once';
import { StartupError } from './startup';

/**
 * The master key encrypts webhook signing secrets and signs media links and cursors.
 * From MASTER_KEY (64 hex characters or base64 of 32 bytes), else generated once into
 * DATA_DIR/master.key with mode 0600. Every instance of one deployment needs the same key.
 */
export function loadMasterKey(dataDir: string, fromEnv: string | undefined): Buffer {
  if (fromEnv) return parseKey(fromEnv, 'MASTER_KEY');
  const file = masterKeyFile(dataDir);
  return parseKey(publishFileOnce(file, randomBytes(32).toString('hex') + '\n').trim(), file);
}

export const masterKeyFile = (dataDir: string) => path.join(dataDir, 'master.key');

function parseKey(text: string, source: string): Buffer {
  const buf = /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64');
  if (buf.length !== 32)
    throw new StartupError(`${source}: the master key must be 32 bytes (64 hex characters or base64 of 32 bytes): generate one with openssl rand -hex 32`);
  return buf;
}

export interface Keys {
  mediaLinks: Buffer;
  cursors: Buffer;
  webhookSecrets: Buffer;
  /** Signs the sign-in device cookies (accounts/throttle.ts). */
  deviceCookies: Buffer;
}

export function deriveKeys(master: Buffer): Keys {
  return {
    mediaLinks: deriveKey(master, 'media-links'),
    cursors: deriveKey(master, 'cursors'),
    webhookSecrets: deriveKey(master, 'webhook-secrets'),
    deviceCookies: deriveKey(master, 'device-cookies'),
  };
}
