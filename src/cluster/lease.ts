import type { Redis } from 'ioredis';
import { FencedError, InvalidArgumentError } from '../errors.js';
import type { PartitionFence } from '../runtime/stream/ownerEpoch.js';
import { runClusterScript } from './scripts.js';

/**
 * The process's monotonic clock in ms (`process.hrtime`: CLOCK_MONOTONIC, the same in every
 * thread of the process, and counting while the process is stopped). Leases are timed on it.
 */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** How long a lease lasts and how much of its end the holder gives up for safety, in ms. */
export interface LeaseTiming {
  /** Time to live of the lease key (`PX`), renewed by its holder. */
  readonly leaseMs: number;
  /**
   * The holder treats its lease as gone this long before its local deadline: room for clock
   * drift between this process and Redis (Redis' distributed-lock notes allow 1% of the TTL
   * plus 2 ms) and for the commit in progress when the check passed.
   */
  readonly safetyMarginMs: number;
}

/**
 * Checks a lease timing: `leaseMs` an integer >= 100, `safetyMarginMs` in [1% of leaseMs + 2, leaseMs / 2].
 * @throws InvalidArgumentError otherwise
 */
export function checkLeaseTiming(t: LeaseTiming): LeaseTiming {
  if (!Number.isInteger(t.leaseMs) || t.leaseMs < 100) throw new InvalidArgumentError(`leaseMs must be an integer >= 100, got ${t.leaseMs}`);
  const drift = Math.ceil(t.leaseMs * 0.01) + 2;
  if (!(t.safetyMarginMs >= drift && t.safetyMarginMs <= t.leaseMs / 2)) {
    throw new InvalidArgumentError(`safetyMarginMs must lie in [${drift}, ${t.leaseMs / 2}] for leaseMs ${t.leaseMs} (clock drift: 1% + 2 ms), got ${t.safetyMarginMs}`);
  }
  return t;
}

/** The default safety margin of a lease: a tenth of it (at least the drift allowance of 1% + 2 ms). */
export function defaultSafetyMargin(leaseMs: number): number {
  return Math.max(Math.ceil(leaseMs / 10), Math.ceil(leaseMs * 0.01) + 2);
}

/**
 * A lease held by this process: a Redis key whose value `<holder> <epoch>` is this
 * acquisition's token, with a TTL its holder renews. The holder counts it valid until
 * `sentAt + leaseMs - safetyMarginMs` on the local monotonic clock (`monotonicMs()`, which
 * keeps counting while the process is stopped), where `sentAt` is when the last successful
 * acquire or renew command was *sent*: Redis started the TTL later than that, so the local
 * deadline comes first unless the clocks drift by more than the margin.
 *
 * As a `PartitionFence`, `check()` throws FencedError once the deadline passed or the lease
 * was found lost; `epoch` is the fencing token (Kleppmann, "How to do distributed locking", 2016).
 */
export class Lease implements PartitionFence {
  #validUntil: number;
  #lost: string | undefined;
  /** Where a `LeaseKeeper` thread writes this lease's renewals (registration id, deadline µs, lost flag). */
  #kept: { readonly view: BigInt64Array; readonly base: number; readonly id: bigint } | undefined;

  constructor(
    /** The lease key. */
    readonly key: string,
    /** The member id holding it. */
    readonly holder: string,
    /** This acquisition's epoch (>= 1). */
    readonly epoch: number,
    readonly timing: LeaseTiming,
    sentAt: number,
    /** What the lease is of, for messages (e.g. `partition count/3`). */
    readonly what: string,
    readonly now: () => number = monotonicMs,
  ) {
    this.#validUntil = sentAt + timing.leaseMs - timing.safetyMarginMs;
  }

  /** The lease key's value while this process holds it. */
  get value(): string {
    return `${this.holder} ${this.epoch}`;
  }

  /** A renew command sent at `sentAt` (local monotonic ms) succeeded. */
  renewed(sentAt: number): void {
    if (this.#lost === undefined) this.#validUntil = Math.max(this.#validUntil, sentAt + this.timing.leaseMs - this.timing.safetyMarginMs);
  }

  /**
   * Renewed by a `LeaseKeeper` thread from now on: it writes this lease's renewals at `base` of
   * `view` while that slot holds registration `id` (`view` undefined: no longer kept). The
   * lease's clock must be `monotonicMs`, the thread's.
   */
  keptIn(view: BigInt64Array | undefined, base: number, id: number): void {
    this.#sync();
    this.#kept = view ? { view, base, id: BigInt(id) } : undefined;
  }

  /** Takes in what the keeper thread found since the last look: a later deadline, or the key lost. */
  #sync(): void {
    const k = this.#kept;
    if (k === undefined || this.#lost !== undefined || Atomics.load(k.view, k.base) !== k.id) return;
    if (Atomics.load(k.view, k.base + 2) === 1n) {
      this.lose('its key no longer holds this epoch: it ran out in Redis or another holder took it');
      return;
    }
    const until = Number(Atomics.load(k.view, k.base + 1)) / 1000;
    if (until > this.#validUntil) this.#validUntil = until;
  }

  /** The lease is gone (a renew found another value, or it was released); `check()` fails from now on. */
  lose(reason: string): void {
    this.#lost ??= reason;
  }

  /** Ms left before the local deadline (<= 0 once passed); -Infinity once lost. */
  remainingMs(): number {
    this.#sync();
    return this.#lost === undefined ? this.#validUntil - this.now() : -Infinity;
  }

  /** True while `check()` passes. */
  get held(): boolean {
    return this.remainingMs() > 0;
  }

  /**
   * @throws FencedError when the lease ran out on the local clock (minus the margin) or was
   *   lost. Running out is then final: the lease counts as lost from that check on, and a
   *   renewal sent before and answered after it does not revive it. Whoever saw the FencedError
   *   stopped for good (a partition's checkpointer closes, its waiting replies fail), so an
   *   owner that went on under the same epoch would keep a partition that can never reply: on
   *   cnr-2000, a worker whose main thread was held past the deadline renewed its leases a
   *   moment later and kept six partitions whose pushes failed their checkpoints for ever (the
   *   job stalled). Now the heartbeat finds the lease not held and stops the partition, and the
   *   next acquisition (a new epoch) starts it again.
   */
  check(): void {
    const left = this.remainingMs(); // first: it takes in what a keeper thread found
    if (this.#lost !== undefined) throw new FencedError(`${this.what}: lease epoch ${this.epoch} lost (${this.#lost})`, this.epoch);
    if (left <= 0) {
      const reason = `ran out ${Math.round(-left)} ms ago (not renewed in time; safety margin ${this.timing.safetyMarginMs} ms)`;
      this.lose(reason);
      throw new FencedError(`${this.what}: lease epoch ${this.epoch} ${reason}`, this.epoch);
    }
  }
}

/** What `acquireLease` takes a lease of. */
export interface LeaseTarget {
  readonly key: string;
  /** The epoch counter of the leased thing (INCR at every acquisition). */
  readonly epochKey: string;
  readonly what: string;
  /** When given, the lease is taken only while this hash assigns `unit` to the holder. */
  readonly assignment?: { readonly key: string; readonly unit: string };
}

/** Result of `acquireLease`: the lease, or why not. */
export type AcquireResult =
  | { readonly kind: 'acquired'; readonly lease: Lease }
  | { readonly kind: 'held' }
  | { readonly kind: 'not-assigned' };

/**
 * Takes the lease of `target` for `holder` if nobody holds it: atomically (one script) checks
 * the assignment when given, increments the epoch counter, and sets `<holder> <epoch>` with
 * `PX leaseMs`.
 * @throws the connection's errors
 */
export async function acquireLease(redis: Redis, target: LeaseTarget, holder: string, timing: LeaseTiming, now: () => number = monotonicMs): Promise<AcquireResult> {
  const sentAt = now();
  const keys = target.assignment ? [target.key, target.epochKey, target.assignment.key] : [target.key, target.epochKey];
  const args = target.assignment ? [holder, timing.leaseMs, target.assignment.unit] : [holder, timing.leaseMs];
  const epoch = Number(await runClusterScript(redis, 'acquire', keys, args));
  if (epoch === -1) return { kind: 'not-assigned' };
  if (epoch === 0) return { kind: 'held' };
  return { kind: 'acquired', lease: new Lease(target.key, holder, epoch, timing, sentAt, target.what, now) };
}

/**
 * Renews `leases` in one script (compare-and-expire): each renewed lease's local deadline
 * moves on; each whose key no longer holds its value is marked lost.
 * @returns the leases found lost
 * @throws the connection's errors (then nothing is renewed: deadlines stay as they were)
 */
export async function renewLeases(redis: Redis, leases: readonly Lease[], leaseMs: number, now: () => number = monotonicMs): Promise<Lease[]> {
  if (leases.length === 0) return [];
  const sentAt = now();
  const result = (await runClusterScript(redis, 'renew', leases.map((l) => l.key), [leaseMs, ...leases.map((l) => l.value)])) as number[];
  const lost: Lease[] = [];
  leases.forEach((l, i) => {
    if (Number(result[i]) === 1) l.renewed(sentAt);
    else {
      l.lose('its key no longer holds this epoch: it ran out in Redis or another holder took it');
      lost.push(l);
    }
  });
  return lost;
}

/**
 * Hands `lease` back (compare-and-delete) and marks it lost locally first, so nothing checks
 * it as held afterwards. @returns true when the key still held it
 * @throws the connection's errors
 */
export async function releaseLease(redis: Redis, lease: Lease): Promise<boolean> {
  lease.lose('released');
  return Number(await runClusterScript(redis, 'release', [lease.key], [lease.value])) === 1;
}

/**
 * Raises an epoch counter to at least `atLeast` (e.g. the epoch a store records, after Redis
 * lost the counter), so that the next acquisition gets a newer epoch. @returns the counter's value
 */
export async function raiseEpoch(redis: Redis, epochKey: string, atLeast: number): Promise<number> {
  return Number(await runClusterScript(redis, 'raiseEpoch', [epochKey], [atLeast]));
}
