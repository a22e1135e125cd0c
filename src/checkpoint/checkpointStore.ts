/**
 * A checkpoint store: copies of RocksDB stores kept under a key (a partition id) outside the
 * machine that owns the store, so that another machine can restore the partition's state.
 * `openCheckpointStore(url)` gives one for `file:///DIR` or `s3://BUCKET/PREFIX`;
 * docs/checkpoints.md describes the layout and the guarantees.
 */
import { walCompressionSupported, type Store } from '../storage/store.js';
import type { CheckpointFileCache } from './fileCache.js';
import type { CheckpointManifest } from './manifest.js';

export type { CheckpointChunk, CheckpointFile, CheckpointManifest } from './manifest.js';

/**
 * The default `walBytesForFlush` of a checkpoint store's put of a `Store`: 512 KiB. Below it a
 * put copies the live WAL (stored whole again at every put, since its content grows under the
 * same name) instead of flushing every column family's memtable into new small SST files
 * (stored, then rewritten by the compactions they cause, stored again). A put then stores at
 * most about 512 KiB of WAL (hashed, copied and fsynced: a few ms here), and a store written
 * faster than that between puts flushes as before. Chosen from bench/checkpoint.ts `smallPuts`
 * (puts after 900 small writes each, 30 rounds, median seconds per put, directory store, load
 * average 10 to 11 on 2 cores): 0.066 flushing, 0.032 at 256 KiB, 0.023 at 512 KiB, 0.028 at
 * 1 MiB, 0.038 at 2 MiB; on S3 0.081 flushing and 0.040 to 0.042 for all four, so the smallest
 * of the fast ones re-stores the fewest bytes (docs/checkpoints.md, "Where the time goes").
 */
export const DEFAULT_CHECKPOINT_WAL_BYTES_FOR_FLUSH = 512 * 1024;

/**
 * The default `walTailBytes` of a checkpoint store's put of a `Store`: 32 MiB. A put whose
 * store only appended to its write-ahead logs (or switched to new ones) since this process's
 * previous put of it stores just the log bytes written since (a "WAL tail put": one object
 * per log and a manifest, instead of a RocksDB checkpoint, a description of every file and
 * their upload), until the chain of such puts stored this many bytes. From three quarters of
 * it the base of the next chain is made in the background (a local checkpoint, which flushes
 * above `walBytesForFlush`, its new files stored, no manifest), and the next tail put begins
 * a new chain on it; a chain that reaches twice the limit all the same ends with a whole put.
 * It bounds what a restore replays from the logs and the bytes a new base stores again
 * (docs/checkpoints.md, "WAL tail puts"; the models: Kafka Streams' changelog topics and
 * Flink's changelog state backend, FLIP-158, which persist state changes as they happen and
 * materialize the state in the background). Chosen from bench/checkpoint.ts on cnr-2000 (16
 * partitions, 2 workers, about 0.7 MB of log per partition and metric round): with 8 MiB,
 * 1,379 of the rounds' 1,540 puts were tails and the rank took 1.15x the time without
 * checkpoints; with 32 MiB 1,501 of 1,547 and 1.12x; restores after that rank took 0.2 to
 * 0.5 s a partition.
 */
export const DEFAULT_CHECKPOINT_WAL_TAIL_BYTES = 32 * 1024 * 1024;

/**
 * The default `walTailBytes` of a put of a `Store` whose log is compressed
 * (`StoreOptions.walCompression`, as CHECKPOINTED_STORE_OPTIONS sets): 8 MiB, about the same
 * log records (what a restore replays) as DEFAULT_CHECKPOINT_WAL_TAIL_BYTES uncompressed: on
 * cnr-2000 a metric round's tail put stored 150 KB compressed (median) where it stored 744 KB
 * uncompressed, a fifth.
 */
export const DEFAULT_CHECKPOINT_COMPRESSED_WAL_TAIL_BYTES = 8 * 1024 * 1024;

/** `walTailBytes` when a put does not give it: by whether the store's log is compressed. */
export function defaultWalTailBytes(source: { readonly walCompression: boolean }): number {
  return source.walCompression ? DEFAULT_CHECKPOINT_COMPRESSED_WAL_TAIL_BYTES : DEFAULT_CHECKPOINT_WAL_TAIL_BYTES;
}

/**
 * Seconds a store checkpointed by WAL tail puts keeps its obsolete write-ahead logs
 * (`StoreOptions.walArchiveSeconds`): 60. A memtable flush makes the chain's log obsolete,
 * usually before the next put read its last bytes; archived, the log is still there to read,
 * and the chain goes on instead of ending in a whole put. Twice the default
 * `checkpointIntervalMs` (30 s), the longest a written store goes without a put.
 */
export const DEFAULT_CHECKPOINT_WAL_ARCHIVE_SECONDS = 60;

/**
 * The `StoreOptions` of a store checkpointed by WAL tail puts: obsolete logs archived for
 * DEFAULT_CHECKPOINT_WAL_ARCHIVE_SECONDS, and the log compressed with ZSTD
 * (`StoreOptions.walCompression`, since a tail put stores the log's new bytes as they are)
 * where the linked RocksDB reads compressed logs back correctly (`walCompressionSupported()`:
 * 8.0 or later; not Debian's 7.8.3, whose reader misreads large compressed records). Read when
 * spread: `{ ...CHECKPOINTED_STORE_OPTIONS }`.
 */
export const CHECKPOINTED_STORE_OPTIONS: Readonly<{ walArchiveSeconds: number; walCompression: boolean }> = Object.freeze(Object.defineProperties({} as { walArchiveSeconds: number; walCompression: boolean }, {
  walArchiveSeconds: { value: DEFAULT_CHECKPOINT_WAL_ARCHIVE_SECONDS, enumerable: true },
  walCompression: { get: () => walCompressionSupported(), enumerable: true },
}));

/** A checkpoint directory already made (by `Store.checkpoint(dir)`), uploaded as it is and left in place. */
export interface CheckpointDirectory {
  readonly directory: string;
}

/** What `put` reports as it goes: the local checkpoint made, then each file stored. */
export type CheckpointProgress =
  | { readonly kind: 'checkpointed'; readonly files: number; readonly bytes: number; readonly toUpload: number }
  | { readonly kind: 'uploaded'; readonly file: string; readonly bytes: number };

/**
 * A test hook (crash tests only): the `afterPuts`-th put of this store object that stores at
 * least one file (counted from 1, one put only) waits `ms` milliseconds between storing its
 * files and writing its manifest, after printing to stderr one line
 * `shardflow test hook: checkpoint <url> <key>@<sequence>: <n> files stored, manifest held <ms> ms`,
 * so that a test can SIGKILL the process exactly mid-upload (files without a manifest).
 * Set from `SHARDFLOW_CHECKPOINT_HOLD_MANIFEST=<afterPuts>:<ms>` by `openCheckpointStore`.
 */
export interface CheckpointManifestHold {
  readonly afterPuts: number;
  readonly ms: number;
}

export interface CheckpointPutOptions {
  /** Opaque bytes kept in the manifest and handed back by `latest` and `restore` (empty by default). */
  readonly metadata?: Uint8Array;
  /**
   * Where the local checkpoint of a `Store` source is made (a fresh folder inside it, removed
   * afterwards). Default: the folder that holds the store, so that RocksDB hard-links its
   * SST files instead of copying them (a link needs the same filesystem). The folder is
   * named `.checkpoint-<store folder name>-<pid>-<sequence>-<random>`; one left by a killed
   * process is removed by the next put of that store.
   */
  readonly stagingDir?: string;
  /**
   * For a `Store` source: the bytes of live write-ahead log from which the local checkpoint
   * flushes the memtables first (`Store.checkpoint`'s `walBytesForFlush`); below it the
   * checkpoint holds the WAL files instead of new SST files, and the restore replays them.
   * Default `DEFAULT_CHECKPOINT_WAL_BYTES_FOR_FLUSH` (512 KiB); 0 flushes at every put, as
   * before.
   */
  readonly walBytesForFlush?: number;
  /**
   * For a `Store` source: the WAL bytes a chain of WAL tail puts should add after its base
   * (by default `DEFAULT_CHECKPOINT_WAL_TAIL_BYTES`, 32 MiB, or for a compressed log
   * `DEFAULT_CHECKPOINT_COMPRESSED_WAL_TAIL_BYTES`, 8 MiB): the next chain's base is made
   * from three quarters of it, and a chain that reaches twice it all the same ends with a whole
   * put; 0 makes every put whole.
   */
  readonly walTailBytes?: number;
  /**
   * true: the caller is the key's only writer at or above its sequences, fenced by a lease
   * that it checks again once the put returned, before it releases anything the checkpoint
   * covers (`PartitionCheckpointPuts`; sequences of a later owner rank above every earlier
   * owner's). A WAL tail put then trusts this process's record of the key's latest checkpoint
   * (its own last put) instead of listing the key's manifests first: a LIST request per put to
   * S3, about a third of a tail put's time there (docs/checkpoints.md, "WAL tail puts"). A
   * writer fenced off meanwhile then stores a manifest below the newer owner's, which no
   * restore takes as the latest and `collect` removes. Default false: every put lists.
   */
  readonly fencedWriter?: boolean;
  /**
   * With `fencedWriter`: a WAL tail put whose log bytes all go into its manifest (packed
   * chunks) stores that manifest in one object with the manifests of the tail puts of the
   * key's parent's other keys (`<parent>/<leaf>`: a worker's partitions of one stage) that
   * this store is putting meanwhile, instead of one object each: a **group commit**
   * (docs/checkpoints.md, "Group commits"). On S3 a worker's partitions then make one PUT
   * where they made one each, all checkpointed within milliseconds of each other at the end
   * of a metric round. `keep`: the checkpoints the key's collects keep (`collect(key, keep)`),
   * so that any process's collect may remove a group object once none of its keys keeps it
   * (the object's name carries each entry's floor). Ignored for a key of one segment and
   * without `fencedWriter`. Default: none (one object per manifest).
   */
  readonly groupCommit?: { readonly keep: number };
  /** Aborts the put between files: nothing becomes visible (the manifest is written last). */
  readonly signal?: AbortSignal;
  /**
   * Called as the put goes (synchronously; an exception thrown here aborts the put). With it,
   * a WAL tail put stores and reports each log chunk before its manifest; without it, it
   * stores the chunks and then the manifest in one step (`CheckpointObjects.putAllThen`).
   */
  readonly onProgress?: (event: CheckpointProgress) => void;
}

/** What one `put` did. Seconds are wall-clock. */
export interface CheckpointPutReport {
  readonly manifest: CheckpointManifest;
  /** Files and bytes of the checkpoint. */
  readonly files: number;
  readonly bytes: number;
  /** Files and bytes stored by this put (the others were in the store already). */
  readonly uploadedFiles: number;
  readonly uploadedBytes: number;
  /** Making the local checkpoint (RocksDB flush + hard links; for a WAL tail put, reading the log's new bytes); 0 for a `CheckpointDirectory`. */
  readonly checkpointSeconds: number;
  /** Hashing the files, storing the new ones and the manifest. */
  readonly uploadSeconds: number;
  /** True when the put stored only what the store's live WAL gained since the previous put (`walTailBytes`). */
  readonly walTail: boolean;
  /**
   * Manifests in the object that holds this put's manifest: 1 for its own manifest object,
   * more for a group object shared with other keys' puts (`CheckpointPutOptions.groupCommit`;
   * summed over puts, 1 / this counts the objects stored).
   */
  readonly groupedManifests: number;
}

/** What one `restore` did. */
export interface CheckpointRestoreReport {
  readonly manifest: CheckpointManifest;
  /** The directory the store was restored into (openable with `Store.open({ path })`). */
  readonly directory: string;
  readonly bytes: number;
  readonly seconds: number;
  /** Files (whole, or WAL chunks) and bytes taken from `options.cache` instead of fetched (0 without one). */
  readonly cachedFiles: number;
  readonly cachedBytes: number;
}

/** Options of `CheckpointStore.restore`. */
export interface CheckpointRestoreOptions {
  /** The checkpoint to restore (default: the newest). */
  readonly sequence?: number;
  /** Content to take instead of fetching it, when there (a warm standby's, `warm`). */
  readonly cache?: CheckpointFileCache;
}

/** What one `warm` did. Seconds are wall-clock. */
export interface CheckpointWarmReport {
  /** The checkpoint warmed: the key's newest. */
  readonly manifest: CheckpointManifest;
  /** Contents (whole files, WAL chunks) and bytes the checkpoint's restore would take from the cache now. */
  readonly files: number;
  readonly bytes: number;
  /** Of them, fetched by this call (the others were cached already). */
  readonly fetchedFiles: number;
  readonly fetchedBytes: number;
  readonly seconds: number;
  /** The SHA-256s of the checkpoint's cached contents (what `CheckpointFileCache.retain` should keep for it). */
  readonly contents: ReadonlySet<string>;
}

/** Options of `CheckpointStore.collect`. */
export interface CheckpointCollectOptions {
  /**
   * Stops the collect between its steps (a listing, a slice of deletes): it then rejects with
   * the abort reason, having removed the oldest of what it would have (the newest checkpoints
   * stay whole; the next collect removes the rest). A partition's checkpointer aborts its
   * collect when a checkpoint is asked for, so that the put does not wait behind it.
   */
  readonly signal?: AbortSignal;
  /**
   * Called before each delete request (a slice of deletes): throws to stop the collect, which
   * rejects with that error. A fenced writer passes its lease check: a process paused past its
   * lease (SIGSTOP, a VM stall) that wakes in the middle of a collect must not delete what the
   * next owner's checkpoints use (found by a new user: a woken owner's collect removed an SST
   * of the next owner's newest checkpoint).
   */
  readonly fence?: () => void;
}

/** What one `collect` removed. */
export interface CheckpointCollectReport {
  /** Sequence numbers of the checkpoints kept, newest first. */
  readonly kept: readonly number[];
  /** Sequence numbers of the checkpoints removed. */
  readonly removed: readonly number[];
  /** Stored files that no kept checkpoint uses, removed (with leftovers of interrupted puts). */
  readonly removedFiles: number;
  readonly removedBytes: number;
}

/**
 * Checkpoints of stores under keys, each with a sequence number the caller chooses
 * (increasing per key). Incremental, as Flink's incremental RocksDB checkpoints are (Apache
 * Flink docs, "Incremental Checkpoints"; S. Ewen, S. Richter et al., "Managing Large State in
 * Apache Flink: An Intro to Incremental Checkpointing", 2018): RocksDB's SST files are
 * immutable, so a checkpoint stores only the files that earlier checkpoints of the key have
 * not stored; here files are named by their SHA-256, so "already stored" is exact.
 *
 * Guarantees: a checkpoint is visible (to `latest`, `list`, `restore`) only once complete,
 * its manifest being written after all its files; `restore` checks every file's size and
 * SHA-256 and refuses a damaged checkpoint (`CheckpointDamagedError`) without leaving a
 * partial directory. One writer per key: `put` and `collect` of one key are serialized
 * within a process; across processes the caller ensures one owner per key (a partition
 * lease), since `collect` removes files that no manifest uses, a concurrent put's among them.
 */
export interface CheckpointStore {
  /** Where it keeps checkpoints: `file:///DIR` or `s3://BUCKET/PREFIX`. */
  readonly url: string;
  /**
   * `url`, and the server where the URL does not name it (`s3://BUCKET/PREFIX at
   * http://127.0.0.1:9000`): two stores are one when their locations are equal. What a
   * cluster's workers compare (`--checkpoints` with another `AWS_ENDPOINT_URL` is another
   * store). Absent: `url`.
   */
  readonly location?: string;
  /**
   * Checkpoints `source` under `key` with `sequence`: a `Store` (checkpointed now: a flush,
   * then hard links, `Store.checkpoint`) or a checkpoint directory already made.
   * @throws InvalidArgumentError on a bad key, a sequence not above the key's latest, a
   *   missing source directory; the abort reason when `signal` aborts; the store's I/O errors
   */
  put(key: string, source: Store | CheckpointDirectory, sequence: number, options?: CheckpointPutOptions): Promise<CheckpointPutReport>;
  /**
   * The newest complete checkpoint of `key`, or undefined when it has none.
   * @throws CheckpointDamagedError when its manifest does not parse
   */
  latest(key: string): Promise<CheckpointManifest | undefined>;
  /**
   * Sequence numbers of `key`'s manifests, oldest first: its complete checkpoints, and older
   * manifests that `collect` keeps only because a kept checkpoint's packed chunks are stored
   * in them (their own checkpoints may no longer restore: a restore then refuses with the
   * missing file). Manifests in group objects (`CheckpointPutOptions.groupCommit`) are
   * listed as the key's own, but those below the key's floor (collected).
   */
  list(key: string): Promise<number[]>;
  /**
   * Restores `key`'s newest checkpoint (or the one of `options.sequence`) into `dir`, which
   * must not exist; written to a temporary sibling folder and renamed once every file checked.
   * @throws CheckpointNotFoundError when there is no such checkpoint;
   *   CheckpointDamagedError when a file is missing or of another size or SHA-256;
   *   InvalidArgumentError when `dir` exists
   */
  restore(key: string, dir: string, options?: CheckpointRestoreOptions): Promise<CheckpointRestoreReport>;
  /**
   * Fetches into `cache` the contents of `key`'s newest checkpoint that a restore could take
   * from it and it lacks: its files stored whole (SST and blob files above all) and the chunks
   * of its WAL files stored in chunks (a linked log, a directory store's, is left out). Each is checked against its size and
   * SHA-256 as a restore checks it. A warm standby calls it as checkpoints are made, so that
   * its restore fetches only what the latest checkpoints added (docs/checkpoints.md, "Warm
   * standbys").
   * @returns undefined when `key` has no checkpoint
   * @throws CheckpointDamagedError when a content is missing or different (nothing of it cached);
   *   the store's and the filesystem's errors
   */
  warm(key: string, cache: CheckpointFileCache): Promise<CheckpointWarmReport | undefined>;
  /**
   * Keeps `key`'s `keep` newest checkpoints (keep >= 1), removes the older ones' manifests
   * (but those holding packed chunks that a kept manifest names, `CheckpointChunk.in`), then
   * every stored file of the key that no kept manifest lists. Its manifests in group objects
   * (`CheckpointPutOptions.groupCommit`) are collected by the key's floor, and a group object
   * of its parent all of whose entries are collected is removed, whichever keys they are of.
   * @throws InvalidArgumentError when keep is not an integer >= 1;
   *   CheckpointDamagedError when a kept manifest does not parse (nothing removed then);
   *   the abort reason when `options.signal` aborts
   */
  collect(key: string, keep: number, options?: CheckpointCollectOptions): Promise<CheckpointCollectReport>;
  /**
   * Removes every checkpoint of `key` (manifests first, newest first, so that what stays
   * visible meanwhile is complete), then all its files; a group object holding one of its
   * manifests is stored again without it, then deleted. For a partition retired for good.
   * @returns the number of checkpoints removed
   */
  remove(key: string): Promise<number>;
  /** Releases connections, once a base being made in the background (see `DEFAULT_CHECKPOINT_WAL_TAIL_BYTES`) is done. */
  close(): Promise<void>;
}
