import type { NativeWriteBatch } from '../native.js';

/** A write waiting for its group: records itself into the group's batch. */
type Record = (batch: NativeWriteBatch) => void;

interface Group {
  readonly batch: NativeWriteBatch;
  sync: boolean;
  readonly done: Promise<void>;
  resolve(): void;
  reject(err: unknown): void;
}

/**
 * Group commit for a store's single writes (`put`, `merge`, `delete`), after LevelDB's
 * writer queue (`DBImpl::Write` / `BuildBatchGroup`, db/db_impl.cc): while one write is on
 * the libuv pool, the writes that arrive are recorded into one write batch, which goes
 * down as one native write when the first ends. A caller that issues writes one at a time
 * pays one pool round trip per write (about 5 µs of CPU); callers that issue many
 * concurrently share one round trip per group.
 *
 * Guarantees, the same as one native call per write:
 * - a write's promise resolves after the write is in the memtable (and the WAL, synced
 *   when asked), so a read issued after it sees it;
 * - writes issued in order are applied in that order;
 * - a write that cannot be recorded (bad key or value, store closed) rejects alone; a
 *   group whose native write fails rejects every write of the group with that error.
 * A group is written with `sync` when any of its writes asked for it. A group holds at
 * most `maxGroupBytes` (1 MiB, LevelDB's cap); more writes start the next group.
 */
export class WriteGroup {
  readonly #newBatch: () => NativeWriteBatch;
  readonly #write: (batch: NativeWriteBatch, sync: boolean) => Promise<void>;
  readonly #maxGroupBytes: number;
  /** The write on the pool now, if any. */
  #inFlight: Promise<void> | undefined;
  /** Groups waiting, oldest first; writes join the last. */
  readonly #waiting: Group[] = [];
  #idle: Promise<void> | undefined;
  #wakeIdle: (() => void) | undefined;

  /**
   * @param newBatch makes an empty native batch (throws StoreClosedError after close)
   * @param write writes a batch (the store's native write)
   */
  constructor(
    newBatch: () => NativeWriteBatch,
    write: (batch: NativeWriteBatch, sync: boolean) => Promise<void>,
    maxGroupBytes = 1 << 20,
  ) {
    this.#newBatch = newBatch;
    this.#write = write;
    this.#maxGroupBytes = maxGroupBytes;
  }

  /**
   * One write. With nothing on the pool, `direct` runs it at once (one native call, no
   * batch to build); otherwise `record` adds it to the waiting group.
   */
  submit(direct: () => Promise<void>, record: Record, sync: boolean): Promise<void> {
    if (this.#inFlight === undefined && this.#waiting.length === 0) {
      let p: Promise<void>;
      try {
        p = direct();
      } catch (err) {
        return Promise.reject(err);
      }
      this.#track(p);
      return p;
    }
    let group = this.#waiting[this.#waiting.length - 1];
    try {
      if (group === undefined || group.batch.byteSize() >= this.#maxGroupBytes) {
        group = newGroup(this.#newBatch());
        this.#waiting.push(group);
      }
      record(group.batch);
    } catch (err) {
      return Promise.reject(err);
    }
    if (sync) group.sync = true;
    return group.done;
  }

  /** Resolves when no write is on the pool and none waits. Never rejects. */
  drained(): Promise<void> {
    if (this.#inFlight === undefined && this.#waiting.length === 0) return Promise.resolve();
    this.#idle ??= new Promise<void>((resolve) => {
      this.#wakeIdle = resolve;
    });
    return this.#idle;
  }

  #track(p: Promise<void>): void {
    this.#inFlight = p;
    const next = () => this.#next();
    p.then(next, next);
  }

  #next(): void {
    this.#inFlight = undefined;
    const group = this.#waiting.shift();
    if (group === undefined) {
      const wake = this.#wakeIdle;
      this.#idle = this.#wakeIdle = undefined;
      wake?.();
      return;
    }
    let p: Promise<void>;
    try {
      p = this.#write(group.batch, group.sync);
    } catch (err) {
      p = Promise.reject(err);
    }
    p.then(group.resolve, group.reject);
    this.#track(p);
  }
}

function newGroup(batch: NativeWriteBatch): Group {
  let resolve!: () => void;
  let reject!: (err: unknown) => void;
  const done = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // A group nobody awaits must not be an unhandled rejection; its writers each got `done`.
  done.catch(() => {});
  return { batch, sync: false, done, resolve, reject };
}
