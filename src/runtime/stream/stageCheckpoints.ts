import { existsSync } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { CheckpointDamagedError, InvalidArgumentError, isShardflowError } from '../../errors.js';
import type { CheckpointManifest, CheckpointPutReport, CheckpointStore } from '../../checkpoint/checkpointStore.js';
import type { CheckpointFileCache } from '../../checkpoint/fileCache.js';
import { decodeInt64, encodeInt64 } from '../../operators/mergeOperators.js';
import type { Store } from '../../storage/index.js';
import type { Logger } from '../actor/logger.js';
import { readOwnerEpoch, type PartitionFence } from './ownerEpoch.js';
import { epochSequence } from './producerEpoch.js';
import type { StreamOutbox } from './outbox.js';
import { StreamColumnFamilies } from './reserved.js';

/** `sf.meta` key of the sequence of the last checkpoint taken of (or restored into) the store (int64 LE). */
export const CHECKPOINT_SEQUENCE_KEY = 'checkpoint-sequence';

/** Default period of a running partition's checkpoints, ms. */
export const DEFAULT_CHECKPOINT_INTERVAL_MS = 30_000;

/** Checkpoints kept per partition by `collect` after each put: the newest and one to fall back on. */
export const CHECKPOINTS_KEPT = 2;

/**
 * How the stage partitions of a host take and restore checkpoints (a cluster worker's
 * `checkpoints`, docs/checkpoints.md, "Partitions that move"). With it, a partition's effects
 * outside its store wait for the checkpoint that covers them: its outbox rows are published
 * and its input messages acked (or dead-lettered) only once a checkpoint of the store holding
 * their effects and marks is durable (the Kafka Streams commit-at-checkpoint model). So a
 * restore of the latest checkpoint on another machine, with the broker redelivering every
 * unacked message and the applied marks skipping what the checkpoint already holds, gives
 * exactly-once effects.
 */
export interface StageCheckpointing {
  readonly store: CheckpointStore;
  /** First segment of every key (the cluster name): a partition's key is `<keyPrefix>/<stage>/p<i>`. */
  readonly keyPrefix: string;
  /** Period of checkpoints while the partition runs, ms (a checkpoint is taken earlier when half its receiver queue waits for one). */
  readonly intervalMs: number;
  /** Checkpoints kept per partition (default {@link CHECKPOINTS_KEPT}). */
  readonly keep?: number;
  /** Content a restore takes instead of fetching it, when there (a warm standby's, `CheckpointStore.warm`). */
  readonly cache?: CheckpointFileCache;
  /** Hears each restore a partition start made, before the store opens. */
  readonly onRestored?: (restore: StageRestore) => void;
  /** Hears each durable put of a partition's checkpoint (after its manifest is stored, before what it covers is released). */
  readonly onPut?: (put: StagePut) => void;
  /**
   * Hears each put of a partition's checkpoint that failed before it was durable (the
   * checkpoint store or the registry did not take it; not a fence): what it covers waits for
   * the next try. A worker shows it in `cluster status` until a put succeeds again.
   */
  readonly onPutFailed?: (failure: StagePutFailure) => void;
  /**
   * Where each key's latest durable checkpoint sequence is recorded beside the checkpoint
   * store (a cluster's: `RedisCheckpointRegistry`). With it, a put is recorded before what it
   * covers is released, and a restore refuses a store older than the record: the checkpoint
   * store alone cannot tell a newest manifest that was deleted from one never put.
   */
  readonly registry?: CheckpointRegistry;
}

/**
 * The record of each checkpoint key's latest durable checkpoint, kept apart from the
 * checkpoint store: the pointer Flink's high-availability services keep in ZooKeeper or
 * Kubernetes to the latest completed checkpoint ("Checkpoint ID counter", "completed
 * checkpoint store"), for the same reason: a restore that took the newest checkpoint the
 * object store lists would, after that store lost its newest manifest (deleted by hand or by
 * an object lifecycle rule), restore an older one in silence, and every message acked since
 * would be lost.
 */
export interface CheckpointRegistry {
  /**
   * Records that `key`'s checkpoint `sequence` is durable; a lower sequence than the one
   * recorded leaves the record as it is (a fenced owner's late record never lowers it).
   * @throws the registry's errors (a cluster's: `BrokerDisconnectedError` when its Redis does
   *   not answer): what the put covers is then not released (the caller tries again at its
   *   next checkpoint)
   */
  recordDurable(key: string, sequence: number): Promise<void>;
  /**
   * The highest sequence recorded durable for `key`, or undefined when none is.
   * @throws the registry's errors (a cluster's: `BrokerDisconnectedError` when its Redis does not answer)
   */
  latestDurable(key: string): Promise<number | undefined>;
}

/**
 * One durable checkpoint of a partition's store: `CheckpointStore.put`'s report (files and
 * bytes of the whole store, those this put stored, the local checkpoint's and the upload's
 * seconds) without the manifest, with the partition and the put's sequence.
 */
export interface StagePut extends Omit<CheckpointPutReport, 'manifest'> {
  readonly stage: string;
  readonly partition: number;
  readonly sequence: number;
}

/** A put of a partition's checkpoint that failed before it was durable. */
export interface StagePutFailure {
  readonly stage: string;
  readonly partition: number;
  readonly error: unknown;
}

/** One restore of a partition's store from its latest checkpoint. */
export interface StageRestore {
  readonly stage: string;
  readonly partition: number;
  readonly sequence: number;
  /** The owner epoch that took the checkpoint. */
  readonly ownerEpoch: number;
  readonly bytes: number;
  /** Download, check and rename, wall-clock seconds. */
  readonly seconds: number;
  /** Why the local store was not used: `missing`, or its owner epoch was older. */
  readonly reason: string;
  /** Chunks of the WAL files restored beyond the first (the WAL tail puts the checkpoint's log was stored by; 0 for a whole put's). */
  readonly walChunks: number;
  /** Of `bytes`, taken from `StageCheckpointing.cache` instead of fetched (a warm standby's). */
  readonly cachedBytes: number;
}

/** What a stage partition's checkpoint records beside its files (JSON in the manifest's metadata). */
export interface StageCheckpointMetadata {
  readonly stage: string;
  readonly partition: number;
  /** The owner epoch of the partition when the checkpoint was taken. */
  readonly ownerEpoch: number;
}

/**
 * The checkpoint key of partition `partition` of `stage`: `<keyPrefix>/<stage>/p<i>`.
 * @throws InvalidArgumentError when a part is not a key segment (see `CheckpointStore` keys)
 */
export function stageCheckpointKey(keyPrefix: string, stage: string, partition: number): string {
  const ok = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
  if (!ok.test(keyPrefix) || !ok.test(stage) || stage === 'files' || stage === 'manifests') {
    throw new InvalidArgumentError(`checkpoint keys are <cluster>/<stage>/p<i> of letters, digits, '.', '_', '-' (a stage named files or manifests cannot be checkpointed); got ${JSON.stringify(`${keyPrefix}/${stage}/p${partition}`)}`);
  }
  return `${keyPrefix}/${stage}/p${partition}`;
}

/** @throws CheckpointDamagedError when the manifest's metadata is not a stage checkpoint's of this partition */
export function readStageCheckpointMetadata(manifest: CheckpointManifest, stage: string, partition: number): StageCheckpointMetadata {
  let m: Partial<StageCheckpointMetadata>;
  try {
    m = JSON.parse(Buffer.from(manifest.metadata).toString('utf8')) as Partial<StageCheckpointMetadata>;
  } catch {
    m = {};
  }
  if (m.stage !== stage || m.partition !== partition || !Number.isInteger(m.ownerEpoch) || m.ownerEpoch! < 0) {
    throw new CheckpointDamagedError(`checkpoint ${manifest.key}@${manifest.sequence} does not record the owner epoch of partition ${partition} of stage ${stage} (metadata ${JSON.stringify(Buffer.from(manifest.metadata).toString('utf8').slice(0, 200))})`, manifest.key, manifest.sequence);
  }
  return m as StageCheckpointMetadata;
}

/**
 * Before a partition's store opens: restores the latest checkpoint of `key` into `storePath`
 * when the local store is missing or older. The local store is kept when its owner epoch
 * (`sf.meta`) is newer than the checkpoint's, or equal with a checkpoint sequence at least the
 * checkpoint's: then it was opened after the checkpoint was taken, by its taker or a later owner,
 * and holds everything whose effects are visible (effects wait for checkpoints). Otherwise it
 * is replaced: the checkpoint is restored into a sibling folder (checked file by file) and
 * renamed into place only then, so a damaged checkpoint leaves the local store as it was.
 * With `checkpointing.registry`, the chosen state (the kept local store's checkpoint sequence,
 * or the restored checkpoint's) must be at least the sequence the registry recorded durable.
 * @param openLocal opens the local store read-write without creating it (the caller's column families)
 * @param metaFamily column family of the owner epoch and checkpoint sequence (default `sf.meta`)
 * @returns the restore, or undefined when the local store is kept or no checkpoint exists
 * @throws CheckpointDamagedError (a file missing or different, metadata not this partition's;
 *   or, with a registry, the newest checkpoint older than the one recorded durable: its
 *   manifest was removed);
 *   the checkpoint store's and the filesystem's errors
 */
export async function restoreStageStoreIfBehind(
  checkpointing: StageCheckpointing, stage: string, partition: number, storePath: string, openLocal: (path: string) => Promise<Store>,
  /** Column family of the owner epoch and checkpoint sequence (the web index's is `meta`). */
  metaFamily: string = StreamColumnFamilies.meta,
): Promise<StageRestore | undefined> {
  const key = stageCheckpointKey(checkpointing.keyPrefix, stage, partition);
  const recorded = await checkpointing.registry?.latestDurable(key);
  const latest = await checkpointing.store.latest(key);
  if (!latest && recorded === undefined) return undefined; // nothing to restore, nothing the local store must reach
  let local: { readonly epoch: number; readonly sequence: number } | undefined;
  if (existsSync(join(storePath, 'CURRENT'))) {
    const opened = await openLocal(storePath);
    try {
      const s = await opened.get(metaFamily, CHECKPOINT_SEQUENCE_KEY);
      local = { epoch: await readOwnerEpoch(opened, metaFamily), sequence: s ? Number(decodeInt64(s)) : -1 };
    } finally {
      await opened.close();
    }
  }
  const taken = latest && readStageCheckpointMetadata(latest, stage, partition);
  // The local store is kept when it holds at least what the latest checkpoint holds (see above).
  const keepLocal = local !== undefined && (!latest || local.epoch > taken!.ownerEpoch || (local.epoch === taken!.ownerEpoch && local.sequence >= latest.sequence));
  if (recorded !== undefined) {
    // What the partition would start from must hold the latest checkpoint the registry says
    // was durable (its acks and outbox rows were released once it was): a kept local store
    // records the checkpoint it was restored from or put last (or the next one's sequence),
    // a restore is the newest the checkpoint store lists.
    const have = keepLocal ? local!.sequence : latest?.sequence;
    if (have === undefined || have < recorded) {
      const what = keepLocal
        ? `the local store ${storePath} holds checkpoint ${local!.sequence} (owner epoch ${local!.epoch}) and the checkpoint store's newest is ${latest ? `${latest.sequence} (owner epoch ${taken!.ownerEpoch})` : 'none'}`
        : latest ? `the checkpoint store's newest is ${latest.sequence} (owner epoch ${taken!.ownerEpoch})` : 'the checkpoint store has none';
      throw new CheckpointDamagedError(
        `partition ${partition} of stage ${stage}: checkpoint ${recorded} of ${key} was recorded durable (what it covers was acknowledged), but ${what}: ` +
          `its manifest was removed (by hand or an object lifecycle rule?), and restoring an older state would lose what was acknowledged since. ` +
          `Put the manifest back (the checkpoint store's manifests/ folder of the key), or retire the cluster and begin afresh`,
        key, recorded,
      );
    }
  }
  if (!latest || keepLocal) return undefined;
  const reason = local === undefined ? 'missing' : `the local store's owner epoch ${local.epoch} (checkpoint ${local.sequence}) is older than checkpoint ${latest.sequence}'s ${taken!.ownerEpoch}`;
  const staging = `${storePath}.restoring-${process.pid}`;
  await rm(staging, { recursive: true, force: true });
  const report = await checkpointing.store.restore(key, staging, { sequence: latest.sequence, ...(checkpointing.cache ? { cache: checkpointing.cache } : {}) });
  await rm(storePath, { recursive: true, force: true });
  await rename(staging, storePath);
  const walChunks = report.manifest.files.reduce((n, f) => n + Math.max(0, (f.chunks?.length ?? 0) - 1), 0);
  const restore = { stage, partition, sequence: latest.sequence, ownerEpoch: taken!.ownerEpoch, bytes: report.bytes, seconds: report.seconds, reason, walChunks, cachedBytes: report.cachedBytes };
  checkpointing.onRestored?.(restore);
  return restore;
}

/** A committed batch whose acks (and dead letters) wait for the checkpoint that covers it. */
export interface HeldBatch {
  /** Its messages. */
  readonly messages: number;
  /** Acks or dead-letters them (on the consumer that delivered them). */
  readonly settle: () => Promise<void>;
}

/**
 * One incarnation of a stage partition's checkpoints: holds the settles of committed batches,
 * and on `checkpoint()` puts the store (when it changed since the last put), publishes the
 * outbox, then settles what it held. Owned by the partition's actor (one call at a time).
 */
export class StageCheckpointer {
  readonly key: string;
  #held: HeldBatch[] = [];
  #heldMessages = 0;
  /** The store was written since the last durable checkpoint (or not known equal to one). */
  #changed: boolean;
  readonly #puts: PartitionCheckpointPuts;
  /** The last `checkpoint()` failed after its put was durable (publishing or settling): the caller must restart the partition. */
  failedAfterPut = false;

  constructor(
    readonly checkpointing: StageCheckpointing,
    readonly stage: string,
    readonly partition: number,
    readonly store: Store,
    readonly fence: PartitionFence | undefined,
    /** The checkpoint the store was just restored from (then it equals it: nothing to put until it changes). */
    restoredSequence: number | undefined,
  ) {
    this.#puts = new PartitionCheckpointPuts(checkpointing, stage, partition, fence, restoredSequence, StreamColumnFamilies.meta);
    this.key = this.#puts.key;
    this.#changed = restoredSequence === undefined;
  }

  /** Messages applied (or skipped) whose acks wait for a checkpoint. */
  get heldMessages(): number {
    return this.#heldMessages;
  }

  /** Holds a committed batch's settle; `committed`: it wrote to the store. */
  hold(batch: HeldBatch, committed: boolean): void {
    this.#held.push(batch);
    this.#heldMessages += batch.messages;
    if (committed) this.#changed = true;
  }

  /** Forgets the held settles (their consumer closed: the broker delivers those messages again). */
  dropHeld(): void {
    this.#held = [];
    this.#heldMessages = 0;
  }

  /**
   * Takes a checkpoint if the store changed (records its sequence in `sf.meta`, then
   * `CheckpointStore.put` under the fence, then `collect`), publishes `outbox`, then settles
   * every held batch. A sequence is above the key's latest and at least `epoch * 2^32`, so a
   * newer owner's checkpoints rank above an older one's.
   * @param options.whole a whole put, never a WAL tail put (a hand-back's last checkpoint)
   * @returns the sequence put, or undefined when the store had not changed
   * @throws FencedError from the fence; the checkpoint store's errors (nothing settled then:
   *   the held batches wait for the next try); the outbox's and the broker's errors after the
   *   put (the caller restarts the partition: the broker redelivers, the marks skip)
   */
  async checkpoint(outbox: StreamOutbox, logger: Logger, options: { readonly whole?: boolean } = {}): Promise<number | undefined> {
    this.failedAfterPut = false;
    this.fence?.check();
    let put: number | undefined;
    if (this.#changed) {
      put = await this.#puts.put(this.store, logger, undefined, { whole: options.whole === true });
      this.#changed = false;
    }
    try {
      if (outbox.size > 0) {
        this.fence?.check();
        await outbox.publish();
        this.#changed = true; // the published rows were deleted: the next checkpoint leaves them out
      }
      const held = this.#held;
      this.dropHeld();
      for (const h of held) await h.settle();
    } catch (err) {
      this.failedAfterPut = true;
      throw err;
    }
    return put;
  }
}

/**
 * The puts of one partition's checkpoints, shared by the stage actor's checkpointer and the
 * web index's partition checkpointer (partitionCheckpointer.ts): each put gets a sequence
 * above the key's latest and at least `epoch * 2^32` (so a newer owner's checkpoints rank
 * above an older one's), records it in the store's meta family (`checkpoint-sequence`, read
 * back by `restoreStageStoreIfBehind`), puts the store under the fence with the
 * {@link StageCheckpointMetadata}, then collects all but the `keep` newest.
 */
export class PartitionCheckpointPuts {
  readonly key: string;
  #lastSequence: number | undefined;
  /** The sequence `prepareNext` wrote into the store (the next put skips its own write when it is its sequence). */
  #prepared: number | undefined;

  constructor(
    readonly checkpointing: StageCheckpointing,
    readonly stage: string,
    readonly partition: number,
    readonly fence: PartitionFence | undefined,
    /** The checkpoint the store was restored from, if it was (the key's latest then). */
    restoredSequence: number | undefined,
    /** Column family of `checkpoint-sequence` (`sf.meta` for a stage, `meta` for the web index). */
    readonly metaFamily: string,
  ) {
    this.key = stageCheckpointKey(checkpointing.keyPrefix, stage, partition);
    this.#lastSequence = restoredSequence;
  }

  /** The sequence of the last put of this incarnation (or the restored one), if any. */
  get lastSequence(): number | undefined {
    return this.#lastSequence;
  }

  /**
   * Puts `store` as the key's next checkpoint; a failed `collect` is logged (the next put collects again).
   * @param options.collect false: leave the collect to the caller (`collect`), off the put's critical path
   * @param options.whole true: a whole put, never a WAL tail put (a hand-back's last checkpoint:
   *   it flushes, so the next owner opens SST files instead of replaying a chain of logs)
   * @param beforeSequenceWrite called synchronously right before the write of `checkpoint-sequence` (a caller that counts writes through the store's write guard leaves that one out)
   * @returns its sequence
   * @throws FencedError from the fence, checked before the put and again once its manifest is
   *   durable (then the checkpoint exists but the caller must release nothing it covers: the next
   *   owner may have restored an older one); the store's and the checkpoint store's errors
   *   (nothing is durable then but files no manifest lists)
   */
  async put(store: Store, logger: Logger, beforeSequenceWrite?: () => void, options: { readonly collect?: boolean; readonly whole?: boolean } = {}): Promise<number> {
    const { put, report } = await this.#putDurable(store, beforeSequenceWrite, options).catch((err: unknown) => {
      if (!isFenced(err)) this.checkpointing.onPutFailed?.({ stage: this.stage, partition: this.partition, error: err });
      throw err;
    });
    const { manifest: _manifest, ...sizes } = report;
    this.checkpointing.onPut?.({ stage: this.stage, partition: this.partition, sequence: put, ...sizes });
    if (options.collect === false) return put;
    await this.collect(logger);
    return put;
  }

  /** `put` up to its checkpoint being durable and recorded (what may then be released). */
  async #putDurable(store: Store, beforeSequenceWrite: (() => void) | undefined, options: { readonly whole?: boolean }): Promise<{ readonly put: number; readonly report: CheckpointPutReport }> {
    this.fence?.check();
    if (this.#lastSequence === undefined) this.#lastSequence = (await this.checkpointing.store.latest(this.key))?.sequence ?? -1;
    const put = this.#nextSequence(this.#lastSequence);
    const prepared = this.#prepared;
    this.#prepared = undefined;
    if (prepared !== put) {
      beforeSequenceWrite?.();
      await store.put(this.metaFamily, CHECKPOINT_SEQUENCE_KEY, encodeInt64(put));
    }
    const metadata: StageCheckpointMetadata = { stage: this.stage, partition: this.partition, ownerEpoch: this.fence?.epoch ?? 0 };
    this.fence?.check();
    const report = await this.checkpointing.store.put(this.key, store, put, { metadata: Buffer.from(JSON.stringify(metadata), 'utf8'), fencedWriter: this.fence !== undefined, groupCommit: { keep: this.checkpointing.keep ?? CHECKPOINTS_KEPT }, ...(options.whole ? { walTailBytes: 0 } : {}) });
    // The lease must still be held now that the manifest is durable: a next owner acquires only
    // after it ran out, so it then restores this checkpoint or a newer one. A lease lost during
    // the put (an upload longer than the lease, a paused process) may have let the next owner
    // restore an older checkpoint already: releasing this one's acks, rows or replies would then
    // confirm effects that owner never sees (the acked messages lost to it for good).
    this.fence?.check();
    this.#lastSequence = put;
    // Recorded before anything the put covers is released: a restore refuses a state older
    // than this record (`restoreStageStoreIfBehind`), so a manifest removed later is refused
    // instead of restored around.
    await this.checkpointing.registry?.recordDurable(this.key, put);
    return { put, report };
  }

  /** The sequence of the put after `last`: above it, and at least the fence's epoch's first. */
  #nextSequence(last: number): number {
    return Math.max(last + 1, epochSequence(this.fence?.epoch ?? 0, 0));
  }

  /**
   * Writes the next put's sequence into the store now (`checkpoint-sequence`, as `put` does
   * first), so that the next put, if its sequence is still that one, starts with its log read
   * instead of a write through the libuv pool: called after a put's replies are released, off
   * the next put's path. The store then says it is as new as a checkpoint not yet put, exactly
   * as a store does whose owner died during that put; `restoreStageStoreIfBehind` keeps such a
   * store (same owner epoch, sequence not below the latest checkpoint's), which holds all the
   * latest checkpoint holds and more. A no-op before the first put of this incarnation.
   * @param beforeWrite called synchronously right before the write
   * @throws the store's errors (the next put writes the sequence itself then)
   */
  async prepareNext(store: Store, beforeWrite?: () => void): Promise<void> {
    if (this.#lastSequence === undefined) return;
    const next = this.#nextSequence(this.#lastSequence);
    beforeWrite?.();
    await store.put(this.metaFamily, CHECKPOINT_SEQUENCE_KEY, encodeInt64(next));
    this.#prepared = next;
  }

  /**
   * Removes all but the `keep` newest checkpoints of the key and the files only they list; a
   * failure is logged (the next collect removes them).
   * @param signal stops the collect between its steps (`CheckpointCollectOptions`)
   * Under a fence, the lease is checked before each delete request: a collect that finds it
   * gone stops (`CheckpointCollectOptions.fence`).
   * @returns false when `signal` stopped it (what it left, the next collect removes), else true
   */
  async collect(logger: Logger, signal?: AbortSignal): Promise<boolean> {
    try {
      const fence = this.fence;
      await this.checkpointing.store.collect(this.key, this.checkpointing.keep ?? CHECKPOINTS_KEPT, { ...(signal ? { signal } : {}), ...(fence ? { fence: () => fence.check() } : {}) });
    } catch (err) {
      if (signal?.aborted && err === signal.reason) return false;
      if (isFenced(err)) {
        // The lease ran out (a pause): this owner deletes nothing more; its next put is fenced too.
        logger.warn({ key: this.key, err }, `collect of checkpoint ${this.key} stopped: the lease is no longer held`);
        return true;
      }
      logger.warn({ key: this.key, err }, `collect of checkpoint ${this.key} failed (the next put collects again)`);
    }
    return true;
  }
}

/** Whether `err` must stop the partition (a fence) rather than leave the checkpoint for the next try. */
export function isFenced(err: unknown): boolean {
  return isShardflowError(err) && err.code === 'SF_ERR_FENCED';
}
