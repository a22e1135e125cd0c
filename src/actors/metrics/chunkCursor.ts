/**
 * A cursor over chunked iteration (`Store.chunks`): one entry at a time with peek, for the
 * synchronized traversal of co-located indexes (merge-join on key order).
 */
export class ChunkCursor {
  #keys: Buffer[] = [];
  #values: Buffer[] = [];
  #i = 0;
  #done = false;
  readonly #it: AsyncIterator<{ keys: Buffer[]; values: Buffer[] }>;

  constructor(source: AsyncIterable<{ keys: Buffer[]; values: Buffer[] }>) {
    this.#it = source[Symbol.asyncIterator]();
  }

  /** Makes the current entry available; false at the end. */
  async ready(): Promise<boolean> {
    while (this.#i >= this.#keys.length) {
      if (this.#done) return false;
      const next = await this.#it.next();
      if (next.done) {
        this.#done = true;
        return false;
      }
      this.#keys = next.value.keys;
      this.#values = next.value.values;
      this.#i = 0;
    }
    return true;
  }

  /** Current key; call after `ready()` returned true. */
  get key(): Buffer {
    return this.#keys[this.#i]!;
  }

  /** Current value; call after `ready()` returned true. */
  get value(): Buffer {
    return this.#values[this.#i]!;
  }

  advance(): void {
    this.#i++;
  }

  async close(): Promise<void> {
    this.#done = true;
    await this.#it.return?.();
  }
}
