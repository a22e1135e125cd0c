import { ActorStoppedError } from '../../errors.js';
import type { Store } from '../../storage/index.js';
import type { Logger } from '../actor/logger.js';
import { systemClock, type Cancel, type Clock } from '../clock.js';
import type { PartitionFence } from './ownerEpoch.js';
import type { StreamOutbox } from './outbox.js';
import { isFenced, PartitionCheckpointPuts, type StageCheckpointing } from './stageCheckpoints.js';

/** Options of {@link PartitionCheckpointer}. */
export interface PartitionCheckpointerOptions {
  readonly checkpointing: StageCheckpointing;
  /** The unit's stage (the checkpoint key is `<keyPrefix>/<stage>/p<partition>`). */
  readonly stage: string;
  readonly partition: number;
  /** Column family of the owner epoch and `checkpoint-sequence` in the store (the web index's `meta`). */
  readonly metaFamily: string;
  /** The ownership the checkpoints are put under (checked before each put and each publish). */
  readonly fence?: PartitionFence;
  /** The checkpoint the store was just restored from, if it was. */
  readonly restoredSequence?: number;
  /** Gives the partition's open store for one checkpoint (opening it when no actor holds it); `release` gives it back. */
  readonly acquire: () => Promise<Store>;
  readonly release: () => Promise<void>;
  readonly logger: Logger;
  /** Timers of the periodic checkpoints (default the system clock). */
  readonly clock?: Clock;
}

/** Wait before a checkpoint is tried again after its publishes failed (a broker away), ms. */
const PUBLISH_RETRY_MS = 250;

/**
 * Quiet time after the last held settle before a checkpoint is taken anyway, ms (at most the
 * interval): the tail of a stream that never fills half a consumer's window (the end of a
 * load) would otherwise wait for the periodic checkpoint at every hop. Kafka Streams commits
 * every 100 ms under exactly-once for the same reason (`commit.interval.ms`, StreamsConfig).
 */
const IDLE_CHECKPOINT_MS = 100;

/** Puts between two collects of old checkpoints (a collect lists and reads manifests: off every put's path). */
const COLLECT_EVERY = 4;

/** Why a collect stopped: a checkpoint was asked for while it ran (the reason of its signal). */
class CollectStopped extends Error {
  constructor() {
    super('a checkpoint was asked for during the collect');
    this.name = 'CollectStopped';
  }
}

interface Held {
  readonly consumer: object;
  readonly messages: number;
  readonly settle: () => Promise<void>;
}

interface Waiter {
  readonly resolve: () => void;
  readonly reject: (err: unknown) => void;
  /** Rejected with the put's error when its checkpoint fails, instead of waiting for the next one. */
  readonly failOnError?: boolean;
}

/**
 * The checkpoints of a partition whose store several actors write at once (a web-index
 * partition: indexer, backlinks, metrics, gc, crawl policy; docs/checkpoints.md, "The web
 * index"). The Kafka Streams commit-at-checkpoint model of `StageCheckpointer`, for many
 * writers: every effect visible outside the partition waits for a durable checkpoint that
 * holds it.
 *
 * - Acks and dead letters of committed input messages are handed to `hold` after their commit;
 *   outbox rows join their outbox's `committedRows` after their commit (`heldForCheckpoint`);
 *   a reply waits on `afterCheckpoint()`, called after the commit it reports.
 * - A checkpoint first takes its **cut**: the held settles, the number of committed rows of
 *   each registered outbox, and the waiting replies, all registered after their commits and so
 *   all held by the store before the local RocksDB checkpoint begins. Then it puts the store
 *   (`PartitionCheckpointPuts`), and only once that is durable publishes those rows (not the
 *   ones committed since: the checkpoint may or may not hold them), settles those messages
 *   and resolves those replies. Writes that land between the cut and the local checkpoint are
 *   in the checkpoint without their effects being released: they are released by the next
 *   checkpoint, and after a restore the redelivery is skipped by the applied marks and the
 *   outbox rows are published from the restored store.
 * - When: every `intervalMs` if anything is waiting or the store was written; at once when a
 *   reply waits (`afterCheckpoint`) or a consumer holds half its unacked bound (`hold`); and
 *   100 ms after the last `hold` (but those with `idle: false`) when settles wait (the tail of
 *   a stream). One
 *   checkpoint runs at a time; a request during one runs another right after it.
 * - A failed put is logged; nothing is released and the next trigger tries again (replies
 *   wait). A fence stops the checkpoints for good (waiting replies get the FencedError).
 */
export class PartitionCheckpointer {
  readonly #puts: PartitionCheckpointPuts;
  readonly #clock: Clock;
  #held: Held[] = [];
  readonly #heldBy = new Map<object, number>();
  readonly #outboxes = new Set<StreamOutbox>();
  #waiters: Waiter[] = [];
  /** The store was written (by anyone but the checkpointer's own writes: the sequence, the deletes of published rows) since the last cut. */
  #changed: boolean;
  #skipWrite = false;
  #running: Promise<void> | undefined;
  #again = false;
  #timer: Cancel | undefined;
  #idle: Cancel | undefined;
  #closed: unknown;
  #checkpoints = 0;
  /** The next checkpoint is a whole put (`afterCheckpoint({ whole: true })`). */
  #wholeNext = false;
  /** A collect of old checkpoints is due (put off while a checkpoint was asked for). */
  #collectDue = false;
  /** The collect running, stopped by a checkpoint asked for meanwhile. */
  #collecting: AbortController | undefined;
  /** Collects a checkpoint asked for stopped part way. */
  #collectsStopped = 0;
  /** Settles released by a checkpoint and still running (close() waits for them). */
  readonly #settling = new Set<Promise<void>>();

  constructor(readonly options: PartitionCheckpointerOptions) {
    this.#puts = new PartitionCheckpointPuts(options.checkpointing, options.stage, options.partition, options.fence, options.restoredSequence, options.metaFamily);
    this.#clock = options.clock ?? systemClock;
    this.#changed = options.restoredSequence === undefined;
  }

  /** The checkpoint key (`<keyPrefix>/<stage>/p<partition>`). */
  get key(): string {
    return this.#puts.key;
  }

  /** Checkpoints put by this incarnation. */
  get checkpoints(): number {
    return this.#checkpoints;
  }

  /** Collects of old checkpoints stopped part way because a checkpoint was asked for (each goes on at a later checkpoint). */
  get collectsStopped(): number {
    return this.#collectsStopped;
  }

  /** Messages whose acks (or dead letters) wait for a checkpoint. */
  get heldMessages(): number {
    let n = 0;
    for (const h of this.#held) n += h.messages;
    return n;
  }

  /** Starts the periodic checkpoints (every `checkpointing.intervalMs`). */
  start(): void {
    if (this.#closed !== undefined || this.#timer) return;
    const tick = () => {
      this.#timer = undefined;
      if (this.#closed !== undefined) return;
      if (this.#changed || this.#held.length > 0 || this.#waiters.length > 0 || this.#rows() > 0) this.#request();
      this.#timer = this.#clock.setTimeout(tick, this.options.checkpointing.intervalMs);
    };
    this.#timer = this.#clock.setTimeout(tick, this.options.checkpointing.intervalMs);
  }

  /** For the store's write guard: called before every write of the partition's store. */
  noteWrite(): void {
    if (this.#skipWrite) this.#skipWrite = false;
    else this.#changed = true;
  }

  /** Publishes `outbox`'s committed rows after the checkpoints that hold them (it must be opened with `heldForCheckpoint`). A closed outbox is dropped. */
  register(outbox: StreamOutbox): void {
    this.#outboxes.add(outbox);
  }

  /**
   * Holds the settle (acks, dead letters) of committed input messages until a checkpoint
   * covers their commit. Call after the commit.
   * @param consumer the consumer that delivered them (see `dropHeld`)
   * @param unackedBound the consumer's unacked bound: holding half of it checkpoints at once
   * @param options.idle false: no checkpoint IDLE_CHECKPOINT_MS after this hold; the settles
   *   wait for the next checkpoint asked for otherwise (a reply waiting, half the bound, the
   *   interval). For a consumer whose acks nobody waits for and whose partition checkpoints
   *   soon anyway: the metric actor's folds, released by the next push's checkpoint (an idle
   *   checkpoint after each fold's commit made 0.1 to 0.4 puts per partition per round more,
   *   and a push asking for its checkpoint while one ran waited for two puts). Default true.
   */
  hold(consumer: object, messages: number, settle: () => Promise<void>, unackedBound: number, options: { readonly idle?: boolean } = {}): void {
    if (this.#closed !== undefined) return; // stopped: the broker delivers them again to the next owner
    this.#held.push({ consumer, messages, settle });
    const held = (this.#heldBy.get(consumer) ?? 0) + messages;
    this.#heldBy.set(consumer, held);
    if (held * 2 >= unackedBound) this.#request();
    else if (options.idle !== false) this.#armIdle();
  }

  /** (Re)starts the idle timer: a checkpoint once no settle was held for IDLE_CHECKPOINT_MS. */
  #armIdle(): void {
    this.#idle?.();
    this.#idle = this.#clock.setTimeout(() => {
      this.#idle = undefined;
      if (this.#held.length > 0) this.#request();
    }, Math.min(IDLE_CHECKPOINT_MS, this.options.checkpointing.intervalMs));
  }

  /** Forgets the held settles of `consumer` (it closed: the broker delivers those messages again). */
  dropHeld(consumer: object): void {
    this.#held = this.#held.filter((h) => h.consumer !== consumer);
    this.#heldBy.delete(consumer);
  }

  /**
   * Resolves once a checkpoint whose cut was taken after this call is durable and has
   * published and settled what it covers: call it after a commit whose outcome a reply
   * reports. Starts that checkpoint at once (after the one running, if any).
   * @param options.whole that checkpoint is a whole put, never a WAL tail put (a hand-back's
   *   last: it flushes, so the next owner opens SST files instead of replaying a chain of logs)
   * @param options.failOnError when that checkpoint fails, reject with its error instead of
   *   waiting for the next one: for a caller that no periodic checkpoint would wake (a first
   *   start's put, before `start()`; a hand-back's last put, before `close()`), which would
   *   otherwise wait for ever on a store that refuses every put
   * @throws (rejects) the fence's FencedError; ActorStoppedError when the checkpointer closes
   *   first; with `failOnError`, the failed put's error
   */
  afterCheckpoint(options: { readonly whole?: boolean; readonly failOnError?: boolean } = {}): Promise<void> {
    if (this.#closed !== undefined) return Promise.reject(this.#closed);
    if (options.whole) this.#wholeNext = true;
    const done = new Promise<void>((resolve, reject) => this.#waiters.push({ resolve, reject, ...(options.failOnError ? { failOnError: true } : {}) }));
    this.#request();
    return done;
  }

  /**
   * Stops the periodic checkpoints and drops what waits (held settles are left to the broker's
   * redelivery; waiting replies reject with ActorStoppedError), after the checkpoint running
   * and the settles that earlier checkpoints released.
   */
  async close(): Promise<void> {
    this.#closeWith(new ActorStoppedError(`the checkpoints of ${this.key} stopped`));
    await this.#running?.catch(() => undefined);
    await Promise.all([...this.#settling]);
  }

  #closeWith(reason: unknown): void {
    this.#closed ??= reason;
    this.#timer?.();
    this.#timer = undefined;
    this.#idle?.();
    this.#idle = undefined;
    this.#held = [];
    this.#heldBy.clear();
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w.reject(this.#closed);
  }

  #rows(): number {
    let n = 0;
    for (const o of this.#outboxes) n += o.closed ? 0 : o.committedRows;
    return n;
  }

  #request(): void {
    if (this.#closed !== undefined) return;
    if (this.#running) {
      this.#again = true;
      this.#collecting?.abort(new CollectStopped());
      return;
    }
    this.#running = (async () => {
      do {
        this.#again = false;
        await this.#once();
      } while (this.#again && this.#closed === undefined);
    })().finally(() => {
      this.#running = undefined;
    });
  }

  /** One checkpoint: the cut, the put, then the release of what the cut listed. Never throws. */
  async #once(): Promise<void> {
    // The cut: every entry below was registered after its commit, so the store holds it now.
    for (const o of this.#outboxes) if (o.closed) this.#outboxes.delete(o);
    const rows = new Map<StreamOutbox, number>();
    for (const o of this.#outboxes) if (o.committedRows > 0) rows.set(o, o.committedRows);
    const held = this.#held;
    this.#held = [];
    this.#heldBy.clear();
    const waiters = this.#waiters;
    this.#waiters = [];
    const changed = this.#changed;
    this.#changed = false;
    const whole = this.#wholeNext;
    this.#wholeNext = false;
    if (!changed && held.length === 0 && waiters.length === 0 && rows.size === 0) return;
    const { logger } = this.options;
    try {
      await this.#withStore((store, own) => this.#puts.put(store, logger, own, { collect: false, whole }));
      this.#checkpoints++;
    } catch (err) {
      // Nothing was released: it all waits for the next try.
      this.#changed ||= changed;
      this.#wholeNext ||= whole;
      this.#held = held.concat(this.#held);
      for (const h of this.#held) this.#heldBy.set(h.consumer, (this.#heldBy.get(h.consumer) ?? 0) + h.messages);
      for (const w of waiters) if (w.failOnError) w.reject(err);
      this.#waiters = waiters.filter((w) => !w.failOnError).concat(this.#waiters);
      if (isFenced(err)) {
        this.#closeWith(err);
        return;
      }
      logger.warn({ key: this.key, err }, `checkpoint of ${this.key} failed; its publishes, acks and replies wait for the next one`);
      return;
    }
    // Durable: release what the cut listed, in order (publishes before the acks of the inputs
    // that caused them). The replies go once every row is sent, before the writes that delete
    // the sent rows (those only spare sending them again), the acks and the collect.
    let failed: unknown;
    let unsent = rows.size;
    let replied = false;
    const reply = () => {
      if (replied || failed !== undefined) return;
      replied = true;
      for (const w of waiters) w.resolve();
    };
    if (unsent === 0) reply();
    for (const [outbox, count] of rows) {
      try {
        // The deletes of published rows need no checkpoint of their own: rows a restore brings
        // back are published again with their sequences, and the receivers' marks skip them.
        await outbox.publishCommitted(count, () => {
          this.#skipWrite = true;
        }, () => {
          if (--unsent === 0) reply();
        });
      } catch (err) {
        failed ??= err; // the rows stay committed: the next checkpoint publishes them
      } finally {
        this.#skipWrite = false;
      }
    }
    // The settles at once (acks commute; one at a time took seconds for a few hundred under
    // load), and in the background: only close() waits for them. Awaited here, they held the
    // next checkpoint back (a broker's acks took up to 0.7 s, p90, on a worker busy with pushes).
    if (held.length > 0) {
      const settling: Promise<void> = Promise.all(held.map(async (h) => {
        try {
          await h.settle();
        } catch (err) {
          // its consumer closed (the actor restarted): the broker delivers those messages again
          logger.debug({ key: this.key, err }, 'a held ack failed after its checkpoint (the broker redelivers, the marks skip)');
        }
      })).then(() => {
        this.#settling.delete(settling);
      });
      this.#settling.add(settling);
    }
    if (failed === undefined) {
      // Off the next put's path: when a checkpoint is already asked for, the sequence is left
      // to its put and the collect to a later checkpoint (a collect took 130 ms, median, and a
      // push that asked meanwhile waited for it).
      if (!this.#again) await this.#prepareNext();
      // Old checkpoints go after the replies, every COLLECT_EVERY puts (`keep` newest stay then).
      if (this.#checkpoints % COLLECT_EVERY === 0) this.#collectDue = true;
      if (this.#collectDue && !this.#again) {
        // A checkpoint asked for meanwhile stops the collect (`#request`): the put does not
        // wait behind it, and a later one goes on where it stopped.
        const collecting = new AbortController();
        this.#collecting = collecting;
        try {
          this.#collectDue = !(await this.#puts.collect(logger, collecting.signal));
          if (this.#collectDue) this.#collectsStopped++;
        } finally {
          this.#collecting = undefined;
        }
      }
      return;
    }
    // A failure after every row was sent (deleting them) leaves the replies sent: what they
    // wait for happened.
    const unreplied = replied ? [] : waiters;
    if (isFenced(failed)) {
      for (const w of unreplied) w.reject(failed);
      this.#closeWith(failed);
      return;
    }
    logger.warn({ key: this.key, err: failed }, `publishing the outbox after checkpoint of ${this.key} failed; the next checkpoint publishes again`);
    this.#waiters = unreplied.concat(this.#waiters);
    this.#clock.setTimeout(() => this.#request(), PUBLISH_RETRY_MS);
  }

  /**
   * Runs `work` on the partition's store (acquired for it, released after); `own`, called right
   * before a write, marks that write as the checkpointer's own (not a change to checkpoint).
   */
  async #withStore<T>(work: (store: Store, own: () => void) => Promise<T>): Promise<T> {
    const store = await this.options.acquire();
    try {
      return await work(store, () => {
        this.#skipWrite = true;
      });
    } finally {
      this.#skipWrite = false;
      await this.options.release();
    }
  }

  /** The next put's sequence written now, off its path (`PartitionCheckpointPuts.prepareNext`); a failure leaves it to the put. */
  async #prepareNext(): Promise<void> {
    if (this.#closed !== undefined) return;
    try {
      await this.#withStore((store, own) => this.#puts.prepareNext(store, own));
    } catch (err) {
      this.options.logger.debug({ key: this.key, err }, 'writing the next checkpoint sequence ahead failed (the next put writes it)');
    }
  }
}
