/**
 * A map of the keys set most recently, bounded: it holds the last `capacity / 2` to `capacity` keys
 * set, in two generations. When the newer one fills (`capacity / 2` keys), it becomes the older and
 * the older is dropped whole.
 *
 * Evicting one oldest key per insert (`map.delete(map.keys().next().value)`) looks O(1) but is not:
 * a JavaScript `Map` keeps deleted slots until it rehashes, and iteration from the start walks them,
 * so each eviction costs more as deletions pile up (measured at 6–20 µs per insert at 50,000 keys).
 * Dropping a generation costs nothing per key.
 */
export class RecentMap<K, V extends NonNullable<unknown>> {
  private current = new Map<K, V>();
  private previous = new Map<K, V>();
  private readonly generation: number;

  /** @param capacity the most keys held (at least half of them are always the newest set) */
  constructor(capacity: number) {
    this.generation = Math.max(1, Math.floor(capacity / 2));
  }

  // One lookup per generation (values are never undefined): a lookup in a map this large mostly waits on memory.
  get(key: K): V | undefined {
    return this.current.get(key) ?? this.previous.get(key);
  }

  has(key: K): boolean {
    return this.current.has(key) || this.previous.has(key);
  }

  /** Sets `key` as the newest (in the newer generation, where it shadows any older value). */
  set(key: K, value: V): void {
    this.current.set(key, value);
    if (this.current.size >= this.generation) {
      this.previous = this.current;
      this.current = new Map();
    }
  }
}
