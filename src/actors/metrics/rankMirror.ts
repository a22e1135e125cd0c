import { grown } from './grown.js';
import { ResidualFrontier } from './residualFrontier.js';

/**
 * A metric actor's in-memory copy of its partition's `ranks` column family: [x, r] per page
 * slot (AdjacencyCache slots), and the slots that have an entry. RocksDB stays the record
 * (every change is still a merge there, and scores are read from it); the mirror only
 * spares each push round a full scan of `ranks`. It follows the same float64 additions as
 * the `float64Add` merge operator, in the same order (a contribution adds [0, delta], a push
 * adds [r, -r]).
 *
 * Valid only while nothing else wrote `ranks`: it records `AdjacencyCache.ranksEpoch` at
 * build time and the push rebuilds it (by a full scan) when the epoch moved. It lives in the
 * actor's state, so a restart rebuilds it, and the actor drops it while a write is in
 * flight, so a write that fails (and restarts the actor) never leaves it ahead of or
 * behind the store.
 */
export class RankMirror {
  #x = new Float64Array(1024);
  #r = new Float64Array(1024);
  #present = new Uint8Array(1024);
  /** Index of each present slot in `slots`. */
  #position = new Int32Array(1024);
  /** Slots with an entry in `ranks`, in the order they were first seen. */
  readonly slots: number[] = [];
  /**
   * The residuals of this mirror's pages by magnitude (ResidualFrontier), accounted by the
   * pushes that use this mirror; a new mirror (a scan) starts a new one.
   */
  readonly frontier = new ResidualFrontier();

  /** @param epoch `AdjacencyCache.ranksEpoch` when the scan that fills it began */
  constructor(readonly epoch: number) {}

  x(slot: number): number {
    return this.#x[slot]!;
  }

  r(slot: number): number {
    return this.#r[slot]!;
  }

  /** True when `slot` has an entry. */
  has(slot: number): boolean {
    return slot < this.#present.length && this.#present[slot] === 1;
  }

  /** Index of `slot` in `slots` (the scan's `ranks` key order, then first-seen order), -1 when it has no entry. */
  position(slot: number): number {
    return this.has(slot) ? this.#position[slot]! : -1;
  }

  /** Records a slot's stored [x, r] (from a scan). */
  set(slot: number, x: number, r: number): void {
    this.#touch(slot);
    this.#x[slot] = x;
    this.#r[slot] = r;
  }

  /** Adds [dx, dr], as a merge of that operand does. */
  add(slot: number, dx: number, dr: number): void {
    this.#touch(slot);
    this.#x[slot]! += dx;
    this.#r[slot]! += dr;
  }

  #touch(slot: number): void {
    if (slot >= this.#present.length) this.#grow(slot + 1);
    if (this.#present[slot] === 0) {
      this.#present[slot] = 1;
      this.#position[slot] = this.slots.length;
      this.slots.push(slot);
    }
  }

  #grow(n: number): void {
    this.#x = grown(this.#x, n);
    this.#r = grown(this.#r, n);
    this.#present = grown(this.#present, n);
    this.#position = grown(this.#position, n);
  }
}
