import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { BrokerDisconnectedError, InvalidArgumentError } from '../errors.js';
import { monotonicMs, type Lease, type LeaseTiming } from './lease.js';
import type { MemberReport } from './membership.js';
import { clusterScriptSource } from './scripts.js';

/**
 * The lease keeper: a thread of the worker's process, with its own Redis connection, that
 * renews the membership key and the partition leases every heartbeat, whatever the worker's
 * event loop is doing.
 *
 * Why a thread: on the event loop, a renewal waits behind whatever runs there. On cnr-2000
 * with checkpoints (2 workers on 2 cores, load average 6 to 7), the event loops stalled for
 * 1.9 s then 0.8 s back to back at the start of the metric rounds, past a 3 s lease less its
 * margin: every partition of both workers was fenced at once, restarted under a new epoch
 * and put its checkpoints whole again (a third more time in the rounds). Kafka met the same
 * problem the same way: KIP-62 moved the consumer's heartbeats to a background thread, so
 * that processing time no longer counts against the session timeout, and bounded processing
 * time separately (`max.poll.interval.ms`).
 *
 * The separate bound here is `maxStallMs`: the event loop stamps a shared clock slot every
 * {@link ALIVE_PERIOD_MS}; once that stamp is older than `maxStallMs`, the thread stops
 * renewing (and stops the membership heartbeats), so a wedged process loses its partitions
 * as before, only later. A stopped process (SIGSTOP, a VM paused) stops this thread too: its
 * leases run out in Redis as they always did.
 *
 * Safety is unchanged: a renewal counts only when Redis answered that the key still held this
 * acquisition's value, from the time the command was sent (`Lease`), and the holder's
 * commits still check the local deadline. The thread writes each lease's new deadline (or
 * that it was found lost) in shared memory, which `Lease.remainingMs()` reads.
 *
 * Shared memory (BigInt64, read and written with `Atomics`): slot 0 is the event loop's last
 * stamp (monotonic µs); lease slot `i` is at `1 + 3i`: the registration id, the deadline
 * (monotonic µs), 1 when found lost. Only the thread writes lease slots.
 */
export class LeaseKeeper {
  readonly #worker: Worker;
  readonly #view: BigInt64Array;
  readonly #alive: NodeJS.Timeout;
  readonly #slots: (Lease | undefined)[];
  readonly #bySlot = new Map<Lease, number>();
  #registrations = 0;
  #closing: Promise<void> | undefined;
  #membershipStopped: { resolve: () => void } | undefined;
  #exited = false;

  private constructor(worker: Worker, view: BigInt64Array, slots: number, readonly onProblem: (message: string) => void, onFailure: (err: Error) => void) {
    this.#worker = worker;
    this.#view = view;
    this.#slots = new Array<Lease | undefined>(slots).fill(undefined);
    const stamp = () => Atomics.store(this.#view, 0, BigInt(Math.round(monotonicMs() * 1000)));
    stamp();
    this.#alive = setInterval(stamp, ALIVE_PERIOD_MS);
    this.#alive.unref();
    worker.on('message', (m: KeeperMessage) => {
      if (m.type === 'problem') this.onProblem(m.message);
      else if (m.type === 'membership-stopped') this.#membershipStopped?.resolve();
    });
    // A thread that died renews nothing: its leases would run out one by one, in silence.
    let failure: Error | undefined;
    worker.on('error', (err) => (failure = err));
    worker.on('exit', (code) => {
      this.#exited = true;
      this.#membershipStopped?.resolve();
      if (this.#closing === undefined) onFailure(new Error(`the lease keeper thread stopped (exit code ${code}${failure ? `: ${failure.message}` : ''}): no lease is renewed any more`, { cause: failure }));
    });
  }

  /**
   * Starts the thread and connects it to the cluster's Redis (`url`).
   * `options.slots`: most leases kept at once. `membership`: the member key and member set
   * it renews (`PX leaseMs`) with the latest `report`. `onProblem` hears a failed renewal and
   * a stall past `maxStallMs` (the thread goes on trying at the next heartbeat); `onFailure`
   * hears that the thread died before `close()` (nothing is renewed from then on).
   * @throws BrokerDisconnectedError when the thread cannot reach Redis within `connectTimeoutMs`
   */
  static async start(options: LeaseKeeperOptions): Promise<LeaseKeeper> {
    const view = new BigInt64Array(new SharedArrayBuffer(8 * (1 + 3 * options.slots)));
    Atomics.store(view, 0, BigInt(Math.round(monotonicMs() * 1000))); // before the thread's first beat reads it
    const data: KeeperData = {
      url: options.url,
      ioredis: createRequire(import.meta.url).resolve('ioredis'),
      renewLua: clusterScriptSource('renew'),
      leaseMs: options.timing.leaseMs,
      safetyMarginMs: options.timing.safetyMarginMs,
      heartbeatMs: options.heartbeatMs,
      maxStallMs: options.maxStallMs,
      connectTimeoutMs: options.connectTimeoutMs,
      memberKey: options.membership.key,
      membersKey: options.membership.setKey,
      memberId: options.membership.id,
      view,
    };
    // `__name`: the helper esbuild (tsx) adds to keep function names, absent in a thread's script.
    const worker = new Worker(`const __name = (f) => f;\n(${keeperMain.toString()})()`, { eval: true, name: 'shardflow lease keeper', workerData: data });
    let timer: NodeJS.Timeout | undefined;
    const ready = new Promise<void>((resolve, reject) => {
      const onMessage = (m: KeeperMessage) => {
        if (m.type === 'ready') resolve();
        else if (m.type === 'failed') reject(new BrokerDisconnectedError(`the lease keeper cannot reach the cluster's redis at ${options.url}: ${m.message}`));
        else return;
        worker.off('message', onMessage);
      };
      worker.on('message', onMessage);
      worker.once('error', reject);
      timer = setTimeout(() => reject(new BrokerDisconnectedError(`the lease keeper did not reach the cluster's redis at ${options.url} within ${options.connectTimeoutMs} ms`)), options.connectTimeoutMs + 1000);
    });
    try {
      await ready;
    } catch (err) {
      await worker.terminate();
      throw err;
    } finally {
      clearTimeout(timer);
    }
    return new LeaseKeeper(worker, view, options.slots, options.onProblem, options.onFailure);
  }

  /** True once the thread stopped (closed, or died: see `onFailure`). */
  get exited(): boolean {
    return this.#exited;
  }

  /** The membership report written from the next heartbeat on. */
  report(report: MemberReport): void {
    this.#worker.postMessage({ type: 'report', json: JSON.stringify(report) });
  }

  /**
   * Renews `lease` every heartbeat from now on, until `drop(lease)` or until it is found lost.
   * @throws RangeError when every slot is taken; InvalidArgumentError for a lease on another clock than `monotonicMs`
   */
  keep(lease: Lease): void {
    if (this.#bySlot.has(lease)) return;
    if (lease.now !== monotonicMs) throw new InvalidArgumentError(`the lease keeper times leases on monotonicMs; ${lease.what} has another clock`);
    const slot = this.#slots.indexOf(undefined);
    if (slot < 0) throw new RangeError(`the lease keeper holds ${this.#slots.length} leases already`);
    const id = ++this.#registrations;
    this.#slots[slot] = lease;
    this.#bySlot.set(lease, slot);
    lease.keptIn(this.#view, 1 + 3 * slot, id);
    this.#worker.postMessage({ type: 'keep', slot, id, key: lease.key, value: lease.value });
  }

  /** Stops renewing `lease` (a no-op when not kept). Its slot's last deadline no longer counts. */
  drop(lease: Lease): void {
    const slot = this.#bySlot.get(lease);
    if (slot === undefined) return;
    this.#bySlot.delete(lease);
    this.#slots[slot] = undefined;
    lease.keptIn(undefined, 0, 0);
    this.#worker.postMessage({ type: 'drop', slot });
  }

  /**
   * Ends the membership heartbeats and leaves the cluster on the thread's own connection, after
   * its last membership write (deletes the member key, removes the id from the member set): one
   * connection keeps the order, so a write delayed on it (a timeout, a reconnect) cannot bring the
   * member back after the leave. Resolves once done, or at once when the thread stopped; a failed
   * leave is reported to `onProblem` (the member key then runs out after leaseMs).
   */
  stopMembership(): Promise<void> {
    return new Promise<void>((resolve) => {
      if (this.#exited) return resolve();
      this.#membershipStopped = { resolve };
      this.#worker.postMessage({ type: 'stop-membership' });
    });
  }

  /** Stops the thread (its connection closed; nothing renewed from now on). Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      clearInterval(this.#alive);
      for (const lease of [...this.#bySlot.keys()]) this.drop(lease);
      await this.#worker.terminate();
    })();
    return this.#closing;
  }
}

/** How often the event loop stamps its clock slot, ms. */
export const ALIVE_PERIOD_MS = 100;

/** Options of {@link LeaseKeeper.start}. Times in ms. */
export interface LeaseKeeperOptions {
  /** The cluster's Redis: `redis://host:port[/db]`. */
  readonly url: string;
  readonly timing: LeaseTiming;
  /** Period of the renewals; also the thread's command timeout. */
  readonly heartbeatMs: number;
  /** The thread renews nothing once the event loop has not stamped its slot for this long. */
  readonly maxStallMs: number;
  readonly connectTimeoutMs: number;
  /** Most leases kept at once. */
  readonly slots: number;
  /** The membership key (`SET … PX leaseMs`) and the member set (`SADD`) of this member id. */
  readonly membership: { readonly key: string; readonly setKey: string; readonly id: string };
  readonly onProblem: (message: string) => void;
  readonly onFailure: (err: Error) => void;
}

interface KeeperData {
  readonly url: string;
  readonly ioredis: string;
  readonly renewLua: string;
  readonly leaseMs: number;
  readonly safetyMarginMs: number;
  readonly heartbeatMs: number;
  readonly maxStallMs: number;
  readonly connectTimeoutMs: number;
  readonly memberKey: string;
  readonly membersKey: string;
  readonly memberId: string;
  readonly view: BigInt64Array;
}

type KeeperMessage =
  | { readonly type: 'ready' }
  | { readonly type: 'failed'; readonly message: string }
  | { readonly type: 'problem'; readonly message: string }
  | { readonly type: 'membership-stopped' };

/**
 * The thread's script (stringified: it sees nothing of this module). Every heartbeatMs from
 * the start of the last: unless the event loop stalled past maxStallMs, sends the membership
 * write and one renew script for every kept lease; on the answer, moves each renewed lease's
 * deadline to `sent + leaseMs - safetyMarginMs`, or marks it lost.
 */
function keeperMain(): void {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { parentPort, workerData } = require('node:worker_threads') as typeof import('node:worker_threads');
  const d = workerData as KeeperData;
  const { Redis } = require(d.ioredis) as typeof import('ioredis');
  const now = () => Number(process.hrtime.bigint()) / 1e6;
  const micros = (ms: number) => BigInt(Math.round(ms * 1000));
  const view = d.view;
  const kept = new Map<number, { id: number; key: string; value: string }>();
  let report: string | undefined;
  let membership = true;
  let inFlight: Promise<unknown> = Promise.resolve();
  let stalled = false;
  const post = (m: KeeperMessage) => parentPort!.postMessage(m);
  const redis = new Redis(d.url, { lazyConnect: true, connectTimeout: d.connectTimeoutMs, commandTimeout: d.heartbeatMs });
  redis.on('error', () => {}); // reported by the commands that fail; ioredis reconnects meanwhile
  redis.defineCommand('sfc_renew', { lua: d.renewLua });
  const renew = (n: number, ...args: Array<string | number>) => (redis as unknown as Record<string, (n: number, ...a: Array<string | number>) => Promise<number[]>>).sfc_renew!(n, ...args);

  parentPort!.on('message', (m: { type: string; slot?: number; id?: number; key?: string; value?: string; json?: string }) => {
    if (m.type === 'report') report = m.json;
    else if (m.type === 'keep') {
      const base = 1 + 3 * m.slot!;
      Atomics.store(view, base + 1, 0n);
      Atomics.store(view, base + 2, 0n);
      Atomics.store(view, base, BigInt(m.id!));
      kept.set(m.slot!, { id: m.id!, key: m.key!, value: m.value! });
    }
    else if (m.type === 'drop') kept.delete(m.slot!);
    else if (m.type === 'stop-membership') {
      membership = false;
      void inFlight
        .then(() => redis.multi().del(d.memberKey).srem(d.membersKey, d.memberId).exec())
        .catch((err: Error) => post({ type: 'problem', message: `leaving the cluster failed: ${err.message}` }))
        .then(() => post({ type: 'membership-stopped' }));
    }
  });

  const beat = async (): Promise<void> => {
    const sent = now();
    const stall = sent - Number(Atomics.load(view, 0)) / 1000;
    if (stall > d.maxStallMs) {
      if (!stalled) post({ type: 'problem', message: `the event loop has not turned for ${Math.round(stall)} ms (maxStallMs ${d.maxStallMs}): leases and membership are no longer renewed` });
      stalled = true;
      return;
    }
    stalled = false;
    const steps: Promise<unknown>[] = [];
    if (membership && report !== undefined) {
      steps.push(redis.multi().set(d.memberKey, report, 'PX', d.leaseMs).sadd(d.membersKey, d.memberId).exec()
        .catch((err: Error) => post({ type: 'problem', message: `membership heartbeat failed: ${err.message}` })));
    }
    const batch = [...kept.entries()];
    if (batch.length > 0) {
      steps.push(renew(batch.length, ...batch.map(([, l]) => l.key), d.leaseMs, ...batch.map(([, l]) => l.value)).then(
        (result) => {
          batch.forEach(([slot, l], i) => {
            if (kept.get(slot) !== l) return; // dropped (or the slot reused) meanwhile
            const base = 1 + 3 * slot;
            if (Number(result[i]) === 1) {
              const until = micros(sent + d.leaseMs - d.safetyMarginMs);
              if (until > Atomics.load(view, base + 1)) Atomics.store(view, base + 1, until);
            } else {
              Atomics.store(view, base + 2, 1n);
              kept.delete(slot);
            }
          });
        },
        (err: Error) => post({ type: 'problem', message: `lease renewal failed: ${err.message}` }),
      ));
    }
    inFlight = Promise.all(steps);
    await inFlight;
  };
  const schedule = (lastStart: number) => {
    setTimeout(() => {
      const started = now();
      void beat().then(() => schedule(started));
    }, Math.max(0, lastStart + d.heartbeatMs - now()));
  };

  redis.connect().then(() => redis.ping()).then(
    () => {
      post({ type: 'ready' });
      schedule(now() - d.heartbeatMs);
    },
    (err: Error) => post({ type: 'failed', message: err.message }),
  );
}
