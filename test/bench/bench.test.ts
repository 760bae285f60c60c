import { formatTable, percentile, sampleProcess, summarize } from '../../scripts/bench/measure';
import { parseOptions } from '../../scripts/bench/options';
import { filterCombinations } from '../../scripts/bench/depth';
import type { Dataset } from '../../scripts/bench/dataset';
import { clientIp, STREAM_COUNTS } from '../../scripts/bench/live';
import { pauseBefore } from '../../scripts/bench/inbox';
import { runMarkdownPart } from '../../scripts/bench/markdown';
import type { BenchContext } from '../../scripts/bench/context';
import { drift, trend } from '../../scripts/bench/soak';

// The benchmark's own arithmetic and options; the timed runs are exercised by `npm run bench`.
describe('bench harness', () => {
  it('takes nearest-rank percentiles', () => {
    const sorted = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(sorted, 50)).toBe(50);
    expect(percentile(sorted, 99)).toBe(99);
    expect(percentile([7], 99)).toBe(7);
    expect(percentile([], 50)).toBeNaN();
    expect(summarize([3, 1, 2])).toEqual({ n: 3, p50: 2, p99: 3, mean: 2 });
  });

  it('measures CPU and memory of a running process', () => {
    const sampler = sampleProcess(process.pid);
    const until = Date.now() + 50;
    while (Date.now() < until); // burn some CPU in this process
    const usage = sampler.stop();
    expect(usage.cpuMs).toBeGreaterThan(0);
    expect(usage.rssMiB).toBeGreaterThan(10);
    expect(usage.peakRssMiB).toBeGreaterThanOrEqual(usage.rssMiB);
  });

  it('prints rows with their baseline and ratio as a markdown table', () => {
    const table = formatTable([
      { what: 'GET a|b', value: 613.4, unit: 'req/s', baseline: 2454, ratio: 0.25, p50Ms: 40, p99Ms: 103, cpuMsPerOp: 1.62, peakRssMiB: 301 },
    ]);
    const lines = table.split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[2]).toBe('| GET a\\|b | 613 req/s | 2,454 req/s | 0.25 | 40.0 | 103 | 1.62 | 301 |  |');
  });

  it('covers every combination of the five list filters', () => {
    const combos = filterCombinations({ createdFrom: 0, createdTo: 365 * 24 * 3600 * 1000 } as Dataset);
    expect(combos).toHaveLength(32);
    expect(new Set(combos.map((c) => Object.keys(c).sort().join(','))).size).toBe(32);
  });

  it("tells a soak's decline from its noise: the last three windows against the first three, and a fitted trend", () => {
    expect(drift([100, 100, 100, 100, 100, 100])).toBe(0);
    expect(drift([100, 102, 98, 91, 90, 89])).toBeCloseTo(-0.1, 5);
    // One slow window in the middle moves neither the drift nor much of the trend.
    expect(drift([100, 100, 100, 40, 100, 100, 100])).toBe(0);
    expect(Math.abs(trend([100, 100, 100, 40, 100, 100, 100]))).toBeLessThan(0.01);
    // A steady decline of 1 % a window over ten windows: about -9 % over the soak.
    const declining = Array.from({ length: 10 }, (_, i) => 100 - i);
    expect(trend(declining)).toBeCloseTo(-9 / 95.5, 5);
    expect(parseOptions(['--parts=soak', '--soak-minutes=3']).soakMinutes).toBe(3);
    expect(parseOptions([]).soakMinutes).toBe(10);
  });

  it('refuses unknown flags and parts', () => {
    expect(parseOptions(['--parts=read,depth', '--engine=both', '--rounds=5']).engines).toEqual(['mysql', 'sqlite']);
    expect(() => parseOptions(['--round=5'])).toThrow(/unknown argument/);
    expect(() => parseOptions(['--parts=reads'])).toThrow(/unknown part/);
  });

  it('has a markdown part that needs no data set and gives one row per markup run, beside its baseline', async () => {
    expect(parseOptions([]).parts).toContain('markdown');
    const logged: string[] = [];
    const ctx = {
      options: parseOptions(['--parts=markdown', '--rounds=1']),
      quiet: async () => '',
      log: (m: string) => logged.push(m),
    } as unknown as BenchContext;
    const rows = await runMarkdownPart(ctx, 10_000);
    expect(rows.map((r) => r.what.match(/of (`.+`)/)?.[1])).toEqual(['`[`', '`*`', '`[*_`']);
    for (const r of rows) expect(r.ratio).toBeCloseTo(r.value / r.baseline!);
    expect(logged).toHaveLength(3);
  });

  it('spreads the inbox live messages so they cannot fall into step with the feed poll', () => {
    expect(pauseBefore(50, 1000, () => 0)).toBe(50);
    expect(pauseBefore(50, 1000, () => 0.999)).toBe(1049);
    const pauses = Array.from({ length: 200 }, () => pauseBefore(50, 1000) % 1000);
    expect(Math.max(...pauses) - Math.min(...pauses)).toBeGreaterThan(500);
  });

  it('has a live part whose streams stay under the per-client-IP limit of the service', () => {
    expect(parseOptions(['--parts=live']).parts).toEqual(['live']);
    expect(parseOptions(['--parts=inbox,inbox-live']).parts).toEqual(['inbox', 'inbox-live']);
    expect(parseOptions([]).parts).toContain('inbox');
    expect(parseOptions([]).parts).toContain('live');
    expect(STREAM_COUNTS).toEqual([0, 100, 500]);
    const perClientIp = new Map<string, number>();
    for (let i = 0; i < 500; i++) perClientIp.set(clientIp(i), (perClientIp.get(clientIp(i)) ?? 0) + 1);
    expect(Math.max(...perClientIp.values())).toBeLessThanOrEqual(16);
    for (const ip of perClientIp.keys()) {
      const [, , third, fourth] = ip.split('.').map(Number);
      expect(ip.startsWith('127.0.')).toBe(true); // loopback, and never the 127.0.0.1 of other clients
      expect(third >= 1 && fourth >= 1 && fourth <= 250).toBe(true);
    }
    expect(clientIp(16 * 250)).toBe('127.0.2.1');
  });
});
