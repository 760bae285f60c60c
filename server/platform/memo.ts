/**
 * `compute` with its results kept by key, all forgotten at once when `max` are kept: for values that
 * are cheap enough to make again now and then, asked for far more often (no LRU bookkeeping on the
 * hot path). `compute` must not return undefined.
 */
export function memoised<K, V>(max: number, compute: (key: K) => V): (key: K) => V {
  const kept = new Map<K, V>();
  return (key) => {
    let value = kept.get(key);
    if (value === undefined) {
      value = compute(key);
      if (kept.size >= max) kept.clear();
      kept.set(key, value);
    }
    return value;
  };
}
