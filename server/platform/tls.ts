import fs from 'node:fs';
import path from 'node:path';
import { publishDirectoryOnce } from './publish-once';

export interface TlsMaterial {
  cert: string;
  key: string;
  /** Set when we generated the certificate, so the operator can be told where it is. */
  generatedAt?: string;
}

/** A self-signed certificate for localhost and 127.0.0.1, valid for one year. */
export async function makeSelfSignedCert(commonName = 'localhost'): Promise<{ cert: string; key: string }> {
  // Loaded only to make a certificate: its X.509 libraries took a quarter of a second of every start.
  const { generate } = await import('selfsigned');
  const pems = await generate([{ name: 'commonName', value: commonName }], {
    keySize: 2048,
    algorithm: 'sha256',
    notAfterDate: new Date(Date.now() + 365 * 24 * 3600 * 1000),
    extensions: [
      { name: 'basicConstraints', cA: true },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, keyCertSign: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
          { type: 7, ip: '::1' },
        ],
      },
    ],
  } as never);
  return { cert: pems.cert, key: pems.private };
}

/** TLS_CERT_FILE/TLS_KEY_FILE, else a self-signed pair under DATA_DIR/tls made on first start. */
export async function loadTls(dataDir: string, certFile?: string, keyFile?: string): Promise<TlsMaterial> {
  if (certFile || keyFile) {
    if (!certFile || !keyFile) throw new Error('Set both TLS_CERT_FILE and TLS_KEY_FILE, or neither.');
    return { cert: fs.readFileSync(certFile, 'utf8'), key: fs.readFileSync(keyFile, 'utf8') };
  }
  const dir = path.join(dataDir, 'tls');
  const cert = path.join(dir, 'localhost.crt');
  if (fs.existsSync(cert) && fs.existsSync(path.join(dir, 'localhost.key'))) {
    return { cert: fs.readFileSync(cert, 'utf8'), key: fs.readFileSync(path.join(dir, 'localhost.key'), 'utf8') };
  }
  // Several processes may start on a fresh DATA_DIR at once; each makes a pair and one pair wins
  // whole, so the files on disk always match each other and every process serves the same one.
  const pair = await makeSelfSignedCert();
  const made = publishDirectoryOnce(dir, { 'localhost.key': { content: pair.key, mode: 0o600 }, 'localhost.crt': { content: pair.cert } });
  const mine = made['localhost.crt'] === pair.cert;
  return { cert: made['localhost.crt'], key: made['localhost.key'], ...(mine ? { generatedAt: cert } : {}) };
}
