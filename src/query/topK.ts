/**
 * Keeps the `k` largest items offered, by `compare` (negative: a before b is smaller): a
 * min-heap of size k, so offering n items costs O(n log k).
 */
export class TopK<T> {
  readonly #heap: T[] = [];
  constructor(readonly k: number, readonly compare: (a: T, b: T) => number) {}

  offer(item: T): void {
    const h = this.#heap;
    if (this.k <= 0) return;
    if (h.length < this.k) {
      h.push(item);
      let i = h.length - 1;
      while (i > 0) {
        const p = (i - 1) >> 1;
        if (this.compare(h[i]!, h[p]!) >= 0) break;
        [h[i], h[p]] = [h[p]!, h[i]!];
        i = p;
      }
      return;
    }
    if (this.compare(item, h[0]!) <= 0) return;
    h[0] = item;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && this.compare(h[l]!, h[m]!) < 0) m = l;
      if (r < h.length && this.compare(h[r]!, h[m]!) < 0) m = r;
      if (m === i) break;
      [h[i], h[m]] = [h[m]!, h[i]!];
      i = m;
    }
  }

  /** The kept items, largest first. */
  sorted(): T[] {
    return [...this.#heap].sort((a, b) => this.compare(b, a));
  }
}
