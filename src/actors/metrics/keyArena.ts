/**
 * Many store keys (URLs as UTF-8) in one growing buffer: key i is `bytes[start(i), end(i))`.
 * One object for all keys instead of a Buffer each, so the adjacency cache costs the
 * garbage collector nothing per page, and a batch of keys goes to RocksDB (or into a
 * message) as this buffer plus two offset arrays, with no copy per key in JS
 * (`WriteBatch.mergeFloat64s` with `starts`, `gatherKeys`).
 *
 * `bytes` is replaced when it grows: read it after adding keys, and do not keep views.
 */
export class KeyArena {
  #bytes: Buffer = Buffer.allocUnsafeSlow(1 << 16);
  #used = 0;
  #starts = new Uint32Array(1024);
  #ends = new Uint32Array(1024);
  #count = 0;

  /** Number of keys. */
  get count(): number {
    return this.#count;
  }

  /** The buffer holding every key (valid until the next `add`). */
  get bytes(): Buffer {
    return this.#bytes;
  }

  /** Appends `text` as UTF-8. @returns its index */
  add(text: string): number {
    const most = text.length * 3; // UTF-8 bytes per UTF-16 unit, at most
    if (this.#used + most > this.#bytes.length) this.#growBytes(this.#used + most);
    if (this.#count === this.#starts.length) {
      const starts = new Uint32Array(this.#count * 2);
      starts.set(this.#starts);
      this.#starts = starts;
      const ends = new Uint32Array(this.#count * 2);
      ends.set(this.#ends);
      this.#ends = ends;
    }
    const start = this.#used;
    this.#used += this.#bytes.write(text, start, 'utf8');
    this.#starts[this.#count] = start;
    this.#ends[this.#count] = this.#used;
    return this.#count++;
  }

  start(i: number): number {
    return this.#starts[i]!;
  }

  end(i: number): number {
    return this.#ends[i]!;
  }

  /** Key i decoded. */
  text(i: number): string {
    return this.#bytes.toString('utf8', this.#starts[i]!, this.#ends[i]!);
  }

  /** Compares key i with `other[start, end)`: negative, 0 or positive as key i sorts before, equals or after it. */
  compare(i: number, other: Uint8Array, start: number, end: number): number {
    return this.#bytes.compare(other, start, end, this.#starts[i]!, this.#ends[i]!);
  }

  /** True when key i equals `other[start, end)` (compared from the end: URLs of a host share their start). */
  equals(i: number, other: Uint8Array, start: number, end: number): boolean {
    const s = this.#starts[i]!;
    const e = this.#ends[i]!;
    if (e - s !== end - start) return false;
    const bytes = this.#bytes;
    for (let k = e - s - 1; k >= 0; k--) if (bytes[s + k] !== other[start + k]) return false;
    return true;
  }

  #growBytes(need: number): void {
    const next = Buffer.allocUnsafeSlow(Math.max(need, this.#bytes.length * 2));
    this.#bytes.copy(next, 0, 0, this.#used);
    this.#bytes = next;
  }
}
