import { grown } from './grown.js';

/**
 * What one push changes in its partition's `ranks`, per page slot (AdjacencyCache slots):
 * the sum of its [dx, dr] operands, so that each page gets one merge however many times the
 * push moved its residual or gave it a contribution. The store and the RankMirror then add
 * the same float64 sums.
 */
export class SlotDeltas {
  #dx = new Float64Array(1024);
  #dr = new Float64Array(1024);
  #seen = new Uint8Array(1024);
  /** Slots changed, in the order first changed. */
  readonly slots: number[] = [];

  dx(slot: number): number {
    return slot < this.#dx.length ? this.#dx[slot]! : 0;
  }

  dr(slot: number): number {
    return slot < this.#dr.length ? this.#dr[slot]! : 0;
  }

  /** Adds [dx, dr] to `slot`. */
  add(slot: number, dx: number, dr: number): void {
    if (slot >= this.#seen.length) {
      const n = Math.max(slot + 1, 2 * this.#seen.length);
      this.#dx = grown(this.#dx, n);
      this.#dr = grown(this.#dr, n);
      this.#seen = grown(this.#seen, n);
    }
    if (this.#seen[slot] === 0) {
      this.#seen[slot] = 1;
      this.slots.push(slot);
    }
    this.#dx[slot]! += dx;
    this.#dr[slot]! += dr;
  }

  /** The changed slots in ascending order (the first traversal gives slots in `ranks` key order: merges in key order for the memtable insert hint). */
  sortedSlots(): Int32Array {
    return Int32Array.from(this.slots).sort();
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
}

/**
 * A first-in first-out queue of page slots holding each slot at most once: the frontier of a
 * push (the pages whose residual a contribution of the push took over the threshold; the
 * work queue of the push method of Andersen, Chung and Lang, FOCS 2006).
 */
export class SlotQueue {
  #items: number[] = [];
  #head = 0;
  #queued = new Uint8Array(1024);

  /** True when `slot` waits in the queue. */
  has(slot: number): boolean {
    return slot < this.#queued.length && this.#queued[slot] === 1;
  }

  /** Appends `slot` (call when not `has(slot)`). */
  push(slot: number): void {
    if (slot >= this.#queued.length) this.#queued = grown(this.#queued, Math.max(slot + 1, 2 * this.#queued.length));
    this.#queued[slot] = 1;
    this.#items.push(slot);
  }

  /** Takes the oldest slot out. @returns it, or -1 when the queue is empty */
  shift(): number {
    if (this.#head >= this.#items.length) return -1;
    const slot = this.#items[this.#head++]!;
    this.#queued[slot] = 0;
    if (this.#head > 4096 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return slot;
  }
}
