/** One queued URL: higher `priority` first, then lower `seq` (first come, first served). */
export interface QueuedUrl {
  readonly url: string;
  readonly priority: number;
  readonly seq: number;
}

/**
 * A binary max-heap of queued URLs of one host, ordered by priority, then by arrival
 * (`seq`), so that equal priorities are crawled breadth-first in discovery order.
 * `push` and `pop` are O(log n); `size` is O(1).
 */
export class UrlHeap {
  readonly #items: QueuedUrl[] = [];

  get size(): number {
    return this.#items.length;
  }

  push(item: QueuedUrl): void {
    const a = this.#items;
    a.push(item);
    let i = a.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(a[i]!, a[parent]!)) break;
      [a[i], a[parent]] = [a[parent]!, a[i]!];
      i = parent;
    }
  }

  /** Removes and returns the first URL, or undefined when empty. */
  pop(): QueuedUrl | undefined {
    const a = this.#items;
    if (a.length === 0) return undefined;
    const top = a[0]!;
    const last = a.pop()!;
    if (a.length > 0) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let best = i;
        if (l < a.length && before(a[l]!, a[best]!)) best = l;
        if (r < a.length && before(a[r]!, a[best]!)) best = r;
        if (best === i) break;
        [a[i], a[best]] = [a[best]!, a[i]!];
        i = best;
      }
    }
    return top;
  }
}

function before(a: QueuedUrl, b: QueuedUrl): boolean {
  return a.priority > b.priority || (a.priority === b.priority && a.seq < b.seq);
}
