'use strict';
/**
 * The body of a password hashing thread (server/accounts/hash-pool.ts): one scrypt at a time, with
 * `scryptSync` on this thread. The async `scrypt` would hand the work back to libuv's thread pool,
 * which every thread of the process shares with file I/O, and undo the point of the pool.
 *
 * Plain CommonJS, so the same file runs from the sources (ts-jest, tsx) and from the build
 * (scripts/build.js copies it beside the compiled pool): a thread cannot load TypeScript.
 */
const { parentPort } = require('node:worker_threads');
const { scryptSync } = require('node:crypto');

parentPort.on('message', (job) => {
  let answer;
  try {
    const key = scryptSync(job.password, job.salt, job.keyLength, { N: job.N, r: job.r, p: job.p, maxmem: job.maxmem });
    answer = { id: job.id, key };
  } catch (err) {
    answer = { id: job.id, error: err instanceof Error ? err.message : String(err) };
  }
  parentPort.postMessage(answer);
});
