import type { RawChunk } from '../../storage/index.js';

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

/**
 * A cursor over raw chunked iteration (`Store.rawChunks`): the current entry as offsets into
 * the chunk's key and value buffers, no object per entry, and no await while the chunk
 * holds entries (`has`); `load` awaits the next chunk. The buffers are valid until `load`
 * (or `close`) is called. For merge-joins over many entries (the metric's first traversal
 * of `ranks` and `outlinks`).
 */
export class RawChunkCursor {
  #chunk: RawChunk | undefined;
  #i = 0;
  #done = false;
  readonly #it: AsyncIterator<RawChunk>;

  constructor(source: AsyncIterable<RawChunk>) {
    this.#it = source[Symbol.asyncIterator]();
  }

  /** True when the current entry is available without awaiting. */
  get has(): boolean {
    return this.#chunk !== undefined && this.#i < this.#chunk.count;
  }

  /** Loads chunks until one holds an entry; false at the end (earlier buffers are no longer valid). */
  async load(): Promise<boolean> {
    while (!this.has) {
      if (this.#done) return false;
      const next = await this.#it.next();
      if (next.done) {
        this.#done = true;
        this.#chunk = undefined;
        return false;
      }
      this.#chunk = next.value;
      this.#i = 0;
    }
    return true;
  }

  /** The current chunk's key bytes (entry at `keyStart` .. `keyEnd`); call while `has`. */
  get keys(): Buffer {
    return this.#chunk!.keys;
  }

  get keyStart(): number {
    return this.#chunk!.keyOffsets[this.#i]!;
  }

  get keyEnd(): number {
    return this.#chunk!.keyOffsets[this.#i + 1]!;
  }

  /** The current chunk's value bytes (entry at `valueStart` .. `valueEnd`); call while `has`. */
  get values(): Buffer {
    return this.#chunk!.values;
  }

  get valueStart(): number {
    return this.#chunk!.valueOffsets[this.#i]!;
  }

  get valueEnd(): number {
    return this.#chunk!.valueOffsets[this.#i + 1]!;
  }

  advance(): void {
    this.#i++;
  }

  async close(): Promise<void> {
    this.#done = true;
    this.#chunk = undefined;
    await this.#it.return?.();
  }
}
