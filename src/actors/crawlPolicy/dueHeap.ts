/** A URL to look at again at time `at` (ms since the epoch). */
export interface DueUrl {
  readonly at: number;
  readonly url: string;
}

/**
 * A binary min-heap of (time, URL): the crawl policy's recrawl and retry schedule. Entries
 * are not removed when a URL is rescheduled; the caller checks a popped entry against the
 * frontier row (its `dueAt`) and skips stale ones.
 */
export class DueHeap {
  readonly #items: DueUrl[] = [];

  get size(): number {
    return this.#items.length;
  }

  /** The earliest entry, without removing it. */
  peek(): DueUrl | undefined {
    return this.#items[0];
  }

  push(item: DueUrl): void {
    const a = this.#items;
    a.push(item);
    let i = a.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (a[parent]!.at <= a[i]!.at) break;
      [a[i], a[parent]] = [a[parent]!, a[i]!];
      i = parent;
    }
  }

  pop(): DueUrl | undefined {
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
        if (l < a.length && a[l]!.at < a[best]!.at) best = l;
        if (r < a.length && a[r]!.at < a[best]!.at) best = r;
        if (best === i) break;
        [a[i], a[best]] = [a[best]!, a[i]!];
        i = best;
      }
    }
    return top;
  }
}
