/** The session lifetimes as pure rules, on a fake clock: no database, no server. */
import {
  cookieMaxAgeSeconds,
  SESSION_ABSOLUTE_MS,
  SESSION_IDLE_MS,
  SESSION_TOUCH_EVERY_MS,
  sessionExpiry,
  sessionState,
  shouldTouch,
} from '../../server/accounts/session-rules';
import { createPasswordHasher, normaliseEmail, OWASP_SCRYPT, passwordProblem } from '../../server/accounts/passwords';

const T0 = Date.UTC(2026, 10, 26, 9, 0, 0);
const MIN = 60_000;

test('the lifetimes are the decided 30 minutes idle and 12 hours absolute', () => {
  expect(SESSION_IDLE_MS).toBe(30 * MIN);
  expect(SESSION_ABSOLUTE_MS).toBe(12 * 60 * MIN);
});

test('a session unused for 30 minutes has ended; one used within them has not', () => {
  const s = { createdAt: T0, lastSeenAt: T0 };
  expect(sessionState(s, T0)).toBe('active');
  expect(sessionState(s, T0 + 30 * MIN - 1)).toBe('active');
  expect(sessionState(s, T0 + 30 * MIN)).toBe('idle_expired');
  expect(sessionState({ createdAt: T0, lastSeenAt: T0 + 29 * MIN }, T0 + 58 * MIN)).toBe('active');
});

test('however much it is used, a session ends 12 hours after sign-in', () => {
  const usedJustNow = { createdAt: T0, lastSeenAt: T0 + 12 * 60 * MIN - MIN };
  expect(sessionState(usedJustNow, T0 + 12 * 60 * MIN - 1)).toBe('active');
  expect(sessionState(usedJustNow, T0 + 12 * 60 * MIN)).toBe('expired');
  // The idle limit never reaches past the absolute one.
  expect(sessionExpiry(usedJustNow).idleExpiresAt).toBe(T0 + 12 * 60 * MIN);
});

test('a use writes last_seen_at at most once a minute', () => {
  const s = { createdAt: T0, lastSeenAt: T0 };
  expect(shouldTouch(s, T0 + SESSION_TOUCH_EVERY_MS - 1)).toBe(false);
  expect(shouldTouch(s, T0 + SESSION_TOUCH_EVERY_MS)).toBe(true);
});

test('the cookie lives until the absolute limit', () => {
  expect(cookieMaxAgeSeconds({ createdAt: T0, lastSeenAt: T0 }, T0)).toBe(43200);
  expect(cookieMaxAgeSeconds({ createdAt: T0, lastSeenAt: T0 }, T0 + 60 * MIN)).toBe(39600);
  expect(cookieMaxAgeSeconds({ createdAt: T0, lastSeenAt: T0 }, T0 + 13 * 60 * MIN)).toBe(0);
});

test('passwords: OWASP scrypt parameters by default, recorded in the hash; verify is exact', async () => {
  expect(OWASP_SCRYPT).toEqual({ N: 2 ** 17, r: 8, p: 1 });
  const production = createPasswordHasher();
  expect(production.params).toEqual(OWASP_SCRYPT);
  const cheap = createPasswordHasher({ N: 2 ** 10, r: 8, p: 1 });
  const hash = await cheap.hash('a long enough password');
  expect(hash).toMatch(/^\$scrypt\$ln=10,r=8,p=1\$[A-Za-z0-9_-]+\$[A-Za-z0-9_-]+$/);
  expect(await cheap.hash('a long enough password')).not.toBe(hash); // a fresh salt each time
  expect(await cheap.verify('a long enough password', hash)).toBe(true);
  expect(await cheap.verify('a long enough passwore', hash)).toBe(false);
  expect(await cheap.verify('a long enough password', 'not a hash')).toBe(false);
  // A hash made with other parameters verifies with its own.
  expect(await production.verify('a long enough password', hash)).toBe(true);
}, 30_000);

test('the production cost runs off the event loop', async () => {
  const production = createPasswordHasher();
  let ticks = 0;
  const timer = setInterval(() => ticks++, 5);
  const hash = await production.hash('a long enough password');
  clearInterval(timer);
  expect(hash.startsWith('$scrypt$ln=17,r=8,p=1$')).toBe(true);
  expect(ticks).toBeGreaterThan(3); // the loop kept turning while scrypt ran
}, 30_000);

test('password and email rules', () => {
  expect(passwordProblem('short')).toMatch(/at least 12/);
  expect(passwordProblem('x'.repeat(257))).toMatch(/at most 256/);
  expect(passwordProblem('twelve chars')).toBeNull();
  expect(passwordProblem('🔑'.repeat(12))).toBeNull(); // characters, not UTF-16 units or bytes
  expect(normaliseEmail('  Ana@Example.COM ')).toBe('ana@example.com');
});
