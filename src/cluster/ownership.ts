import type { Lease } from './lease.js';
import { parseUnitKey, type PartitionUnit } from './units.js';

/**
 * Where a worker is with one unit it holds the lease of:
 * - `opening`: the lease is held; the store is not open yet (its previous owner may still hold it);
 * - `running`: the partition runs under the lease (its fence);
 * - `stopping`: the partition is being stopped (a planned hand-back, a lost lease or a failure).
 */
export type OwnershipState = 'opening' | 'running' | 'stopping';

/** One unit a worker holds the lease of, and the transitions under way on it (run one at a time). */
export class Ownership {
  state: OwnershipState = 'opening';
  /** The transition under way, if any. */
  busy: Promise<void> | undefined;
  /**
   * A planned hand-back is under way: its lease is still renewed every heartbeat until it is
   * released, so that a slow stop (flush, last checkpoint) is not fenced half-way.
   */
  handingBack = false;
  /** A `waiting` event was reported already for this lease. */
  waitingReported = false;
  /** Why it is still opening, once a try found its store held (the `waiting` event's reason). */
  waitingFor: string | undefined;
  readonly partition: PartitionUnit;

  constructor(
    /** `<stage>/<partition>`. */
    readonly unit: string,
    readonly lease: Lease,
  ) {
    this.partition = parseUnitKey(unit);
  }

  /** Runs `task` after the transitions already queued on this unit. `task` must not reject. */
  run(task: () => Promise<void>): Promise<void> {
    const p = (this.busy ?? Promise.resolve()).then(task);
    this.busy = p;
    void p.finally(() => {
      if (this.busy === p) this.busy = undefined;
    });
    return p;
  }
}
