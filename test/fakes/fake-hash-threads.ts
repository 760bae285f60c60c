import { EventEmitter } from 'node:events';
import { scryptSync } from 'node:crypto';
import type { HashThread, ScryptJob } from '../../server/accounts/hash-pool';

export type PostedJob = ScryptJob & { id: number };

/**
 * A password hashing thread the test drives: a hash stays under way until the test answers it
 * (with the real scrypt key), crashes the thread or lets it hang; `autoAnswer` answers each hash
 * on the next turn of the loop, as a quick real thread would.
 */
export class FakeHashThread extends EventEmitter implements HashThread {
  jobs: PostedJob[] = [];
  /** 1 while the pool keeps the thread referenced (a hash under way), 0 when idle. */
  refs = 0;
  terminated = false;
  constructor(private readonly autoAnswer: () => boolean = () => false) {
    super();
  }
  postMessage(message: unknown) {
    this.jobs.push(message as PostedJob);
    if (this.autoAnswer()) setImmediate(() => this.answer());
  }
  async terminate() {
    this.terminated = true;
    this.emit('exit', 1);
    return 1;
  }
  ref() {
    this.refs = 1;
  }
  unref() {
    this.refs = 0;
  }
  /** Answers the last hash it was given with scrypt's key. */
  answer() {
    const job = this.jobs[this.jobs.length - 1];
    const key = scryptSync(job.password, job.salt, job.keyLength, { N: job.N, r: job.r, p: job.p, maxmem: job.maxmem });
    this.emit('message', { id: job.id, key });
  }
  crash(message = 'boom') {
    this.emit('error', new Error(message));
    this.emit('exit', 1);
  }
}

/** Makes FakeHashThreads for a pool's `spawn` and keeps them for the test. */
export function fakeHashThreads(autoAnswer?: () => boolean) {
  const made: FakeHashThread[] = [];
  return {
    made,
    spawn: () => {
      const t = new FakeHashThread(autoAnswer);
      made.push(t);
      return t;
    },
    /** The threads with a hash under way. */
    busy: () => made.filter((t) => !t.terminated && t.refs === 1),
    /** Every hash given to any thread so far. */
    jobs: () => made.flatMap((t) => t.jobs),
  };
}
