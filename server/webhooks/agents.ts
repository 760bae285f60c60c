import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { SecureContext } from 'node:tls';
import type { ResolvedIp } from './ssrf';

/** A `lookup` that answers with the resolved IPs we already checked, so the socket cannot go elsewhere. */
export function pinnedLookup(resolvedIps: ResolvedIp[]): LookupFunction {
  return ((_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    // Node's lookup contract names the IP `address`.
    if (options?.all)
      callback(
        null,
        resolvedIps.map((r) => ({ address: r.ip, family: r.family })),
      );
    else callback(null, resolvedIps[0].ip, resolvedIps[0].family);
  }) as unknown as LookupFunction;
}

export interface PinnedAgentPoolOptions {
  /** Built once for the whole pool: parsing the root store per connection is what made deliveries slow. */
  secureContext: SecureContext;
  /**
   * How long an idle connection is kept. Below the 5 s keep-alive time-out of Node's own HTTP
   * server, a common receiver, so we close first and rarely write into a connection it is closing.
   * A shorter `Keep-Alive: timeout=N` from the receiver wins (Node's agent honours it, minus 1 s).
   */
  keepAliveMs: number;
  /** Idle connections kept per agent (one event address's host, port and resolved IPs); more in flight at once is allowed, they just close afterwards. */
  maxIdleSocketsPerAddress: number;
  /** Agents kept at most; past it the least recently used idle one is closed. */
  maxAgents: number;
}

export interface PinnedAgentLease {
  agent: https.Agent;
  /** The request is over (answered, failed or destroyed): the agent may be dropped once idle. */
  release(): void;
}

export interface PinnedAgentPool {
  /**
   * The keep-alive agent for (host, port, the exact set of checked resolved IPs). Its connections can
   * only ever go to those IPs; when DNS answers something else, another agent is used.
   */
  acquire(host: string, port: number, resolvedIps: ResolvedIp[]): PinnedAgentLease;
  /** Forgets the idle connections of the agent (after one of them turned out to be closed by the receiver). */
  dropIdleSockets(agent: https.Agent): void;
  /** Agents held now (diagnostics and tests). */
  size(): number;
  /** Closes every agent and its connections, and stops the idle sweep. */
  close(): void;
}

interface Entry {
  agent: https.Agent;
  active: number;
  lastUsedAt: number;
}

/**
 * Keep-alive agents keyed by the checked resolved IPs (a pinned agent per checked set of IPs).
 * The SSRF check runs before every attempt (server/webhooks/ssrf.ts, resolveChecked); an idle
 * connection is reused only when that fresh check produced the same IPs as the ones the
 * connection was opened to, because the key of its agent is exactly that set. Idle agents are
 * closed after `keepAliveMs` without use, and at most `maxAgents` are kept, so a worker that talks
 * to many event addresses over time holds no more than a bounded number of agents and sockets.
 */
export function createPinnedAgentPool(opts: PinnedAgentPoolOptions, now: () => number = Date.now): PinnedAgentPool {
  // A Map keeps insertion order: re-inserting on use makes the first idle entry the least recently used.
  const entries = new Map<string, Entry>();

  const sweeper = setInterval(() => sweep(now() - opts.keepAliveMs), Math.max(opts.keepAliveMs, 1000));
  sweeper.unref();

  function drop(key: string, entry: Entry) {
    entries.delete(key);
    entry.agent.destroy();
  }

  /** Closes the agents idle since before `idleBefore`. */
  function sweep(idleBefore: number) {
    for (const [key, entry] of entries) if (entry.active === 0 && entry.lastUsedAt < idleBefore) drop(key, entry);
  }

  /** Makes room for one more agent: closes the least recently used idle one. Busy agents are never closed. */
  function makeRoom() {
    if (entries.size < opts.maxAgents) return;
    for (const [key, entry] of entries) {
      if (entry.active === 0) return drop(key, entry);
    }
  }

  function newAgent(resolvedIps: ResolvedIp[]): https.Agent {
    return new https.Agent({
      keepAlive: true,
      // Idle sockets only: a queue inside the agent would spend the attempt's time-out waiting for a
      // socket. How many deliveries go to one address at once is the worker's decision (its claims).
      maxSockets: Infinity,
      maxFreeSockets: opts.maxIdleSocketsPerAddress,
      timeout: opts.keepAliveMs, // Node's agent closes a free socket that stays idle this long
      scheduling: 'lifo', // reuse the freshest connection, let the others time out
      // Agent options override the request's, so every connection of this agent is pinned.
      lookup: pinnedLookup(resolvedIps),
      secureContext: opts.secureContext,
      rejectUnauthorized: true,
    });
  }

  return {
    acquire(host, port, resolvedIps) {
      const key = JSON.stringify([host.toLowerCase(), port, resolvedIps.map((r) => r.ip).sort()]);
      let entry = entries.get(key);
      if (entry) entries.delete(key);
      else {
        makeRoom();
        entry = { agent: newAgent(resolvedIps), active: 0, lastUsedAt: now() };
      }
      entries.set(key, entry);
      entry.active++;
      const held = entry;
      let released = false;
      return {
        agent: held.agent,
        release() {
          if (released) return;
          released = true;
          held.active--;
          held.lastUsedAt = now();
        },
      };
    },
    dropIdleSockets(agent) {
      for (const sockets of Object.values(agent.freeSockets)) for (const socket of sockets ?? []) socket.destroy();
    },
    size: () => entries.size,
    close() {
      clearInterval(sweeper);
      for (const [key, entry] of entries) drop(key, entry);
    },
  };
}
