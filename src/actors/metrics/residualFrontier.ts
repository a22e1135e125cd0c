import { grown } from './grown.js';
import { RESIDUAL_BUCKETS, residualBucket } from './residualHistogram.js';

/** Relative rounding error of one float64 addition, doubled for margin (2^-53 is the unit roundoff). */
const ROUNDING = 2 ** -52;
/**
 * Relative margin under the threshold at which `candidates` still lists a member of the
 * threshold's bucket: 2^-20, about 2^32 times the relative rounding error of the few float64
 * additions by which a slot's residual may differ from the value accounted for it.
 */
const CANDIDATE_MARGIN = 2 ** -20;
/** Relative size of the sums' error bound past which `remaining` sums the buckets again (then a loss of 6e-8 of the bound at most). */
const RESUM_ABOVE = 2 ** -24;

/**
 * A partition's residuals indexed by magnitude, kept up to date as they change, so that a
 * push round costs what it pushes and what reached the partition, not a pass over every page
 * (issue 18: after a local change, most pages hold a residual far under the threshold that
 * no round touches).
 *
 * Per page slot it keeps the |r| and x last accounted, the page's residual bucket (the
 * power-of-two buckets of residualHistogram.ts) and its place in that bucket's member list,
 * and per bucket the sum of |r| of its members. Then:
 * - `candidates(threshold)` lists the slots whose accounted |r| may exceed `threshold`
 *   (the members of the buckets above `residualBucket(threshold)`, and those of that bucket
 *   whose accounted |r| is over the threshold less a rounding margin) plus the slots
 *   `touch`ed since they were last accounted (their r moved: contributions folded);
 * - `histogram()`, `remaining()` and `sumX()` are the push report's fields, from the running
 *   sums. The sums are updated by adding and subtracting, so each carries a bound on its
 *   rounding error (ROUNDING times the magnitude after each operation, as in Higham,
 *   "Accuracy and Stability of Numerical Algorithms", 2002, section 4.2): `remaining()`
 *   adds it (an upper bound of sum |r|, as the coordinator's stopping bound needs) and
 *   `sumX()` subtracts it (a lower bound of sum x). A bucket that empties is reset to an
 *   exact 0, and once the bound exceeds RESUM_ABOVE of the sum (the residual fell far below
 *   what the sums held) the buckets are summed again from their members.
 *
 * The metric actor keeps one with its RankMirror (which a scan of `ranks` rebuilds) and
 * accounts, after each push, every slot the push or the folded contributions changed.
 */
export class ResidualFrontier {
  #abs = new Float64Array(1024);
  #x = new Float64Array(1024);
  /** Bucket + 1 of the accounted |r| (0: |r| = 0, or not accounted). */
  #bucket = new Int32Array(1024);
  /** Position of the slot in its bucket's member list. */
  #index = new Int32Array(1024);
  /** 1 while the slot is in `#touched`. */
  #touchedFlag = new Uint8Array(1024);
  readonly #touched: number[] = [];
  readonly #members: number[][] = Array.from({ length: RESIDUAL_BUCKETS }, () => []);
  readonly #mass = new Float64Array(RESIDUAL_BUCKETS);
  /** Bound on the rounding error of the sum of `#mass`. */
  #massError = 0;
  #sumX = 0;
  #sumXError = 0;
  /** Slots whose accounted r is not finite (NaN or infinite: no bound holds while any is). */
  readonly #nonFinite = new Set<number>();

  /** Records that `slot`'s residual moved since it was accounted (a contribution was folded). */
  touch(slot: number): void {
    if (slot >= this.#touchedFlag.length) this.#grow(slot + 1);
    if (this.#touchedFlag[slot] === 1) return;
    this.#touchedFlag[slot] = 1;
    this.#touched.push(slot);
  }

  /** Slots touched since they were last accounted. */
  get touched(): readonly number[] {
    return this.#touched;
  }

  /** The |r| last accounted for `slot` (0 when none). */
  abs(slot: number): number {
    return slot < this.#abs.length ? this.#abs[slot]! : 0;
  }

  /** The x last accounted for `slot` (0 when none). */
  x(slot: number): number {
    return slot < this.#x.length ? this.#x[slot]! : 0;
  }

  /**
   * Records `slot`'s residual `r` and rank estimate `x` as they are now (a float64 each;
   * either may be 0), moving the slot between buckets, and clears its touched mark.
   */
  account(slot: number, r: number, x: number): void {
    if (slot >= this.#abs.length) this.#grow(slot + 1);
    const abs = Math.abs(r);
    const old = this.#bucket[slot]! - 1;
    const b = abs === 0 || !Number.isFinite(abs) ? -1 : residualBucket(abs);
    if (old >= 0) {
      this.#mass[old]! -= this.#abs[slot]!;
      this.#massError += ROUNDING * Math.abs(this.#mass[old]!);
      if (b !== old) this.#remove(old, slot);
    }
    if (b >= 0) {
      if (b !== old) this.#add(b, slot);
      this.#mass[b]! += abs;
      this.#massError += ROUNDING * this.#mass[b]!;
    }
    this.#bucket[slot] = b + 1;
    this.#abs[slot] = b >= 0 ? abs : 0;
    // The set is empty but for a diverging computation: no hash lookup per call then.
    if (!Number.isFinite(abs)) this.#nonFinite.add(slot);
    else if (this.#nonFinite.size > 0) this.#nonFinite.delete(slot);
    if (x !== this.#x[slot]) {
      this.#sumX += x - this.#x[slot]!;
      this.#sumXError += ROUNDING * (Math.abs(this.#sumX) + Math.abs(x));
      this.#x[slot] = x;
    }
    this.#touchedFlag[slot] = 0;
  }

  /** Forgets the touched list (after every slot in it was accounted). */
  clearTouched(): void {
    for (const slot of this.#touched) this.#touchedFlag[slot] = 0;
    this.#touched.length = 0;
  }

  /**
   * Slots that may hold |r| > `threshold`: the touched slots (each once), the members of
   * every bucket above `residualBucket(threshold)`, and the members of that bucket whose
   * accounted |r| exceeds `threshold` (1 - CANDIDATE_MARGIN). Infinity gives the touched slots
   * only; the caller checks each slot's residual as it is when pushed.
   *
   * The threshold's own bucket is filtered here, in one pass over a typed array, because it
   * is where the leftover residual of a converged computation sits (the budget threshold
   * falls among the many small residuals it leaves on every page): listed whole, it made
   * the push queue and check thousands of pages per partition and round to push a few
   * hundred (issue 18). A slot not touched since it was accounted holds the same residual
   * up to the rounding of the additions that moved it since (a push's own transfer, a flush
   * folding its pending delta into the mirror: the same terms summed in another order), far
   * under the margin, so the filter drops only slots the push would not push.
   */
  candidates(threshold: number): number[] {
    const out = [...this.#touched];
    if (threshold === Infinity) return out;
    const from = threshold > 0 ? residualBucket(threshold) : 0;
    const abs = this.#abs;
    const flag = this.#touchedFlag;
    const least = threshold * (1 - CANDIDATE_MARGIN);
    for (const slot of this.#members[from]!) if (flag[slot] === 0 && abs[slot]! > least) out.push(slot);
    for (let b = from + 1; b < RESIDUAL_BUCKETS; b++) {
      for (const slot of this.#members[b]!) if (flag[slot] === 0) out.push(slot);
    }
    return out;
  }

  /** Per bucket, the sum of |r| of the accounted slots (negative rounding drift clamped to 0). */
  histogram(): number[] {
    return Array.from(this.#mass, (m) => Math.max(0, m));
  }

  /** An upper bound of the sum of the accounted |r| (Infinity when one is not finite). */
  remaining(): number {
    if (this.#nonFinite.size > 0) return Infinity;
    let total = this.#total();
    if (this.#massError > RESUM_ABOVE * total) {
      this.#resum();
      total = this.#total();
    }
    return total * (1 + RESIDUAL_BUCKETS * ROUNDING) + this.#massError;
  }

  #total(): number {
    let total = 0;
    for (const m of this.#mass) total += Math.max(0, m);
    return total;
  }

  /**
   * Sums every bucket again from its members (a pass over the pages holding a residual):
   * the error bound grows with the magnitudes the sums held, so once the residual has fallen
   * far below them it is re-based on the sums as they are now.
   */
  #resum(): void {
    let error = 0;
    for (let b = 0; b < RESIDUAL_BUCKETS; b++) {
      let m = 0;
      const list = this.#members[b]!;
      for (const slot of list) m += this.#abs[slot]!;
      this.#mass[b] = m;
      error += list.length * ROUNDING * m;
    }
    this.#massError = error;
  }

  /** A lower bound of the sum of the accounted x. */
  sumX(): number {
    return this.#sumX - this.#sumXError;
  }

  #add(b: number, slot: number): void {
    const list = this.#members[b]!;
    this.#index[slot] = list.length;
    list.push(slot);
  }

  #remove(b: number, slot: number): void {
    const list = this.#members[b]!;
    const i = this.#index[slot]!;
    const last = list.pop()!;
    if (last !== slot) {
      list[i] = last;
      this.#index[last] = i;
    }
    if (list.length === 0) this.#mass[b] = 0; // the exact sum of no member: the drift goes with it
  }

  #grow(n: number): void {
    this.#abs = grown(this.#abs, n);
    this.#x = grown(this.#x, n);
    this.#bucket = grown(this.#bucket, n);
    this.#index = grown(this.#index, n);
    this.#touchedFlag = grown(this.#touchedFlag, n);
  }
}

/**
 * A min-heap of page slots ordered by `key(slot)` (a push's scan position), each slot at
 * most once at a time: a push takes its candidates from it in scan order and adds the pages
 * its own contributions take over the threshold further on (binary heap: Williams, CACM
 * 7(6), 1964; O(log n) per add and pop).
 */
export class SlotQueue {
  readonly #heap: number[] = [];
  readonly #keys: number[] = [];
  /** 1 for each slot queued (a flag per slot, not a Set: `has` runs once per local link of every pushed page). */
  #queued = new Uint8Array(1024);

  /** @param key a slot's place in the order (distinct slots, distinct keys) */
  constructor(public key: (slot: number) => number) {}

  /**
   * Empties the queue and orders it by `key` from now on: one queue per metric actor, reused
   * by its pushes, keeps its arrays (a new one per push grew them again every time).
   */
  reset(key: (slot: number) => number): void {
    while (this.pop() >= 0);
    this.key = key;
  }

  /** True while `slot` is queued (added and not popped yet). */
  has(slot: number): boolean {
    return slot < this.#queued.length && this.#queued[slot] === 1;
  }

  /** Queues `slot` (nothing when it is queued already). */
  add(slot: number): void {
    if (this.has(slot)) return;
    if (slot >= this.#queued.length) this.#queued = grown(this.#queued, slot + 1);
    this.#queued[slot] = 1;
    const heap = this.#heap;
    const keys = this.#keys;
    const k = this.key(slot);
    let i = heap.length;
    heap.push(slot);
    keys.push(k);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (keys[parent]! <= k) break;
      heap[i] = heap[parent]!;
      keys[i] = keys[parent]!;
      i = parent;
    }
    heap[i] = slot;
    keys[i] = k;
  }

  /** The queued slot of the lowest key, removed; -1 when none is queued. */
  pop(): number {
    const heap = this.#heap;
    const keys = this.#keys;
    if (heap.length === 0) return -1;
    const top = heap[0]!;
    this.#queued[top] = 0;
    const lastSlot = heap.pop()!;
    const lastKey = keys.pop()!;
    const n = heap.length;
    if (n > 0) {
      let i = 0;
      for (;;) {
        let child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && keys[child + 1]! < keys[child]!) child++;
        if (keys[child]! >= lastKey) break;
        heap[i] = heap[child]!;
        keys[i] = keys[child]!;
        i = child;
      }
      heap[i] = lastSlot;
      keys[i] = lastKey;
    }
    return top;
  }
}
