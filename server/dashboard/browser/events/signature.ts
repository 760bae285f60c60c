/**
 * The signature checker's rules, free of the page: why a delivery's `X-Service-Signature` does or does
 * not verify. It follows the service's signing (server/webhooks/worker.ts `signedHeaders`: `sha256=` and
 * the lowercase hex HMAC-SHA256, under the UTF-8 bytes of the secret, of `<timestamp>.<raw body>`) and
 * the SDK's verifier (sdk/src/webhooks.ts `verifySignedDelivery`: the header formats, 300 s in both
 * directions, the body's id against `X-Service-Delivery`), so a delivery it calls valid is one the SDK
 * accepts with the same secrets. It runs in the browser with Web Crypto only: secrets never leave the page.
 */

/** The SDK's default tolerance between the signing time and the receiver's clock, both directions. */
export const TOLERANCE_SECONDS = 300;

const SIGNATURE = /^sha256=([0-9a-f]{64})$/;
const TIMESTAMP = /^[0-9]{1,12}$/;

export type Reason =
  | 'valid'
  | 'no_secret'
  | 'missing_header'
  | 'missing_prefix'
  | 'malformed_signature'
  | 'malformed_timestamp'
  | 'old_secret'
  | 'new_secret'
  | 'body_changed'
  | 'clock_skew'
  | 'invalid_body'
  | 'id_mismatch'
  | 'event_mismatch';

export interface Finding {
  reason: Reason;
  /** `error`: the SDK refuses the delivery for it; `note`: it verifies, but this explains what happened. */
  level: 'error' | 'note';
  title: string;
  detail: string;
}

export interface CheckInput {
  /** The raw body exactly as received. */
  body: string;
  signature: string | null;
  timestamp: string | null;
  deliveryId: string | null;
  /** `X-Service-Event`, when known. */
  event?: string | null;
  /** Oldest first: the current secret, then the new one of a planned roll. */
  secrets: string[];
  /** The receiver's clock, Unix seconds. */
  now: number;
}

export interface CheckResult {
  /** The SDK's verifier would accept it with these secrets. */
  ok: boolean;
  /** The index in `secrets` of the one that signed it, or null. */
  matched: number | null;
  findings: Finding[];
}

const encoder = new TextEncoder();

async function hmacHex(secret: string, timestamp: string, body: string): Promise<string> {
  const key = await crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const mac = new Uint8Array(await crypto.subtle.sign('HMAC', key, encoder.encode(`${timestamp}.${body}`)));
  let hex = '';
  for (const b of mac) hex += b.toString(16).padStart(2, '0');
  return hex;
}

/** The index of the secret whose signature of `body` is `digest`, or -1. */
async function whichSecret(secrets: string[], timestamp: string, body: string, digest: string): Promise<number> {
  for (let i = 0; i < secrets.length; i++) if ((await hmacHex(secrets[i], timestamp, body)) === digest) return i;
  return -1;
}

/** Bodies a receiver commonly ends up with instead of the raw bytes, and what happened to each. */
function alteredBodies(body: string): [string, string][] {
  const out: [string, string][] = [];
  const add = (b: string, what: string) => {
    if (b !== body && !out.some(([x]) => x === b)) out.push([b, what]);
  };
  add(body.replace(/\s+$/, ''), 'a trailing newline or spaces were added after the last byte');
  add(body.replace(/\r\n/g, '\n'), 'line endings were changed (CRLF)');
  add(body.trim(), 'whitespace was added around the body');
  try {
    add(JSON.stringify(JSON.parse(body)), 'the JSON was parsed and written out again (re-serialised: spacing, line breaks or escapes changed)');
  } catch {
    // not JSON: nothing to re-serialise
  }
  return out;
}

const secretName = (i: number, n: number) => (n === 1 ? 'the secret' : `secret ${i + 1} of ${n}`);

/** Everything that keeps the delivery from verifying, most telling first. */
export async function checkSignature(input: CheckInput): Promise<CheckResult> {
  const findings: Finding[] = [];
  const error = (reason: Reason, title: string, detail: string) => findings.push({ reason, level: 'error', title, detail });
  const secrets = input.secrets.map((s) => s.trim()).filter(Boolean);
  const signature = input.signature?.trim() ?? '';
  const timestamp = input.timestamp?.trim() ?? '';
  const deliveryId = input.deliveryId?.trim() ?? '';

  if (!secrets.length) error('no_secret', 'No secret', 'Paste the signing secret (whsec_…) your receiver checks with.');
  for (const [name, value] of [
    ['X-Service-Signature', signature],
    ['X-Service-Timestamp', timestamp],
    ['X-Service-Delivery', deliveryId],
  ]) {
    if (!value) error('missing_header', `${name} is missing`, `Every delivery carries ${name}; without it the SDK refuses the delivery.`);
  }

  // The digest to compare: from a well-formed header, or recovered from a near miss to say more.
  let digest: string | null = null;
  if (signature) {
    const m = SIGNATURE.exec(signature);
    if (m) digest = m[1];
    else if (/^[0-9a-fA-F]{64}$/.test(signature)) {
      digest = signature.toLowerCase();
      error(
        'missing_prefix',
        'The sha256= prefix is missing',
        'X-Service-Signature is "sha256=" followed by the digest. Compare the whole header value, or strip "sha256=" from it (not from your computed value).',
      );
    } else if (/^sha256=[0-9a-fA-F]{64}$/i.test(signature)) {
      digest = signature.slice(7).toLowerCase();
      error('malformed_signature', 'The signature is not lowercase', 'The service sends lowercase hex; the SDK refuses any other form.');
    } else error('malformed_signature', 'The signature is malformed', 'X-Service-Signature must be sha256= followed by 64 lowercase hex digits.');
  }
  const timestampOk = TIMESTAMP.test(timestamp);
  if (timestamp && !timestampOk) error('malformed_timestamp', 'The timestamp is malformed', 'X-Service-Timestamp is Unix time in whole seconds.');

  let matched: number | null = null;
  if (digest && timestampOk && secrets.length) {
    const i = await whichSecret(secrets, timestamp, input.body, digest);
    if (i >= 0) {
      matched = i;
      if (secrets.length > 1 && i < secrets.length - 1)
        findings.push({
          reason: 'old_secret',
          level: 'note',
          title: `Signed with an old secret (${secretName(i, secrets.length)})`,
          detail:
            'The signature matches an older secret than the last one you pasted. During a planned roll the service signs with the current secret until the switch time: a receiver that checks only with the new secret refuses these. Keep every secret you pasted until the switch (verifyWebhook({ secrets: [current, next] })). After a rotation the old secret signs nothing new: this is an attempt from before it.',
        });
      else if (i > 0)
        findings.push({
          reason: 'new_secret',
          level: 'note',
          title: `Signed with the newer secret (${secretName(i, secrets.length)})`,
          detail:
            'The signature matches the newest secret you pasted, not the older ones. After a rotation or a roll’s switch every attempt carries the new secret: a receiver that checks only with an older one refuses it. Add the new secret to your receiver.',
        });
    } else {
      let hint = '';
      for (const [altered, what] of alteredBodies(input.body)) {
        const j = await whichSecret(secrets, timestamp, altered, digest);
        if (j >= 0) {
          hint = `It matches ${secretName(j, secrets.length)} once undone: ${what}. Verify the raw bytes as received, before any parsing.`;
          break;
        }
      }
      error(
        'body_changed',
        'Body changed, or signed with a secret you did not paste',
        hint ||
          `No pasted secret signed this body at this timestamp. Either the body is not the exact bytes that were sent (a JSON body parser ran before verification and the body was re-serialised, a trailing newline was added, whitespace or escapes such as \\u00e9 changed), the timestamp belongs to another attempt (each attempt has its own), or the secret is another one: after a rotation the old secret stops at once.`,
      );
    }
  }

  if (timestampOk) {
    const age = input.now - Number(timestamp);
    if (age > TOLERANCE_SECONDS)
      error(
        'clock_skew',
        `Clock skew: signed ${age} s before the time checked`,
        `More than the ${TOLERANCE_SECONDS} s a receiver allows, so it is refused as a possible replay. A fresh delivery this old means the receiver’s clock is ahead of the service’s (synchronise it with NTP); an attempt taken from the log is simply old: redeliver it for a fresh signature.`,
      );
    else if (-age > TOLERANCE_SECONDS)
      error(
        'clock_skew',
        `Clock skew: signed ${-age} s after the time checked`,
        `The timestamp is in the future by more than ${TOLERANCE_SECONDS} s: the receiver’s clock is behind the service’s. Synchronise it with NTP.`,
      );
  }

  let parsed: { id?: unknown; event?: unknown } | null = null;
  try {
    const value: unknown = JSON.parse(input.body);
    if (value && typeof value === 'object') parsed = value as { id?: unknown; event?: unknown };
  } catch {
    // reported below
  }
  if (!parsed || typeof parsed.id !== 'string' || typeof parsed.event !== 'string')
    error('invalid_body', 'The body is not an event', 'A delivery’s body is a JSON object {id, event, createdAt, workspaceKey, data}.');
  else {
    if (deliveryId && parsed.id !== deliveryId)
      error(
        'id_mismatch',
        'X-Service-Delivery differs from the body’s id',
        `The header says ${deliveryId}, the signed body ${parsed.id}. The header is not signed; the body is: they must be the same delivery.`,
      );
    const eventHeader = input.event?.trim();
    if (!parsed.id.startsWith(`${parsed.event}:`) || (eventHeader && eventHeader !== parsed.event))
      error('event_mismatch', 'X-Service-Event differs from the body’s event', `The body is a ${parsed.event} event.`);
  }

  const ok = !findings.some((f) => f.level === 'error');
  if (ok)
    findings.unshift({
      reason: 'valid',
      level: 'note',
      title: 'The signature is valid',
      detail: `Signed by ${secretName(matched ?? 0, secrets.length)} within ${TOLERANCE_SECONDS} s of the time checked; the SDK accepts it with these secrets.`,
    });
  return { ok, matched, findings };
}

/** Pasted headers: `Name: value` lines (an HTTP dump, curl -v) or a JSON object (the delivery log's). Names lower-cased. */
export function parseHeaders(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  const trimmed = text.trim();
  if (trimmed.startsWith('{')) {
    try {
      for (const [k, v] of Object.entries(JSON.parse(trimmed) as Record<string, unknown>)) if (typeof v === 'string') out[k.toLowerCase()] = v;
      return out;
    } catch {
      // not JSON after all: read it as lines
    }
  }
  for (const line of trimmed.split(/\r\n?|\n/)) {
    const m = /^[<>]?\s*([A-Za-z0-9-]+)\s*:\s?(.*)$/.exec(line);
    if (m) out[m[1].toLowerCase()] = m[2].trim();
  }
  return out;
}
