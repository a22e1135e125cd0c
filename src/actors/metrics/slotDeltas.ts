import { grown } from './grown.js';

/**
 * What one push changes in its partition's `ranks`, per page slot (AdjacencyCache slots):
 * the sum of its [dx, dr] operands, so that each page gets one merge however many times the
 * push moved its residual or gave it a contribution. The store and the RankMirror then add
 * the same float64 sums.
 *
 * One per metric actor, emptied by `clear` at the start of each push (pushes run one at a
 * time): its arrays are as long as the partition's slots, and a new object per push grew
 * them from 1,024 by doubling every time (17 bytes per slot each; on cnr-2000's 16
 * partitions of about 20,000 pages, some 0.6 MB per push, 0.8 GB of garbage over a fresh
 * computation's 93 rounds).
 */
export class SlotDeltas {
  #dx = new Float64Array(1024);
  #dr = new Float64Array(1024);
  #seen = new Uint8Array(1024);
  #slots = new Int32Array(1024);
  #count = 0;

  /**
   * Slots changed, in the order first changed: a view, valid until the next `add`,
   * `addShares` or `clear` (a typed array kept between pushes: an array emptied by
   * `length = 0` gave its backing store back, and grew again in every push).
   */
  get slots(): Int32Array {
    return this.#slots.subarray(0, this.#count);
  }

  dx(slot: number): number {
    return slot < this.#dx.length ? this.#dx[slot]! : 0;
  }

  dr(slot: number): number {
    return slot < this.#dr.length ? this.#dr[slot]! : 0;
  }

  /** True when this push changed `slot`. */
  has(slot: number): boolean {
    return slot < this.#seen.length && this.#seen[slot] === 1;
  }

  /** Forgets every change (the arrays are kept): O(slots changed). */
  clear(): void {
    for (let i = 0; i < this.#count; i++) {
      const slot = this.#slots[i]!;
      this.#dx[slot] = 0;
      this.#dr[slot] = 0;
      this.#seen[slot] = 0;
    }
    this.#count = 0;
  }

  /** Adds [dx, dr] to `slot`. */
  add(slot: number, dx: number, dr: number): void {
    if (slot >= this.#seen.length) this.#grow(slot + 1);
    if (this.#seen[slot] === 0) {
      this.#seen[slot] = 1;
      this.#changed(slot);
    }
    this.#dx[slot]! += dx;
    this.#dr[slot]! += dr;
  }

  /**
   * Adds [0, mass * weights[i]] to each slot `local[i]` >= 0 (a pushed page's shares to the
   * targets on its own partition: `Adjacency.local`, -1 for the others), in the order of
   * the links.
   */
  addShares(local: Int32Array, weights: Float64Array, mass: number): void {
    for (let i = 0; i < local.length; i++) {
      const slot = local[i]!;
      if (slot < 0) continue;
      if (slot >= this.#seen.length) this.#grow(slot + 1);
      if (this.#seen[slot] === 0) {
        this.#seen[slot] = 1;
        this.#changed(slot);
      }
      this.#dr[slot]! += mass * weights[i]!;
    }
  }

  /** The changed slots in ascending order (the first traversal gives slots in `ranks` key order: merges in key order for the memtable insert hint). */
  sortedSlots(): Int32Array {
    return this.slots.slice().sort();
  }

  /** [dx, dr] of each of `slots`, flattened (the operands of `WriteBatch.mergeFloat64s` with width 2). */
  operands(slots: ArrayLike<number>): Float64Array {
    const out = new Float64Array(2 * slots.length);
    for (let i = 0; i < slots.length; i++) {
      out[2 * i] = this.#dx[slots[i]!]!;
      out[2 * i + 1] = this.#dr[slots[i]!]!;
    }
    return out;
  }

  #changed(slot: number): void {
    if (this.#count === this.#slots.length) this.#slots = grown(this.#slots, this.#count + 1);
    this.#slots[this.#count++] = slot;
  }

  #grow(n: number): void {
    this.#dx = grown(this.#dx, n);
    this.#dr = grown(this.#dr, n);
    this.#seen = grown(this.#seen, n);
  }
}
