/**
 * `shardflow/storage`: the TypeScript API over the native RocksDB addon (native/): stores with
 * column families, write batches, snapshots, iteration, a memory budget shared by stores;
 * and checkpoint stores (`openCheckpointStore`: incremental copies of stores in a directory
 * or S3, src/checkpoint/). docs/storage.md describes the layer (group commit, memory
 * accounting, errors), docs/checkpoints.md the checkpoint stores.
 *
 * @module shardflow/storage
 */
export { Store, rocksdbVersion, walCompressionSupported } from './store.js';
export { mkdirs, mkdirsSync, writableDirectory } from './mkdirs.js';
export type { ColumnFamilyOptions, StoreOptions, StoreCheckpointOptions, WriteOptions, ReadOptions } from './store.js';
export type { Key, PackedKeys } from './key.js';
export { gatherKeys, packKeys, packedKey } from './key.js';
export { WriteBatch } from './writeBatch.js';
export type { PairRuns, PairsOptions } from './writeBatch.js';
export { IndexedWriteBatch } from './indexedBatch.js';
export { Snapshot } from './snapshot.js';
export { SharedResources } from './resources.js';
export type { SharedResourcesOptions, SharedResourcesUsage } from './resources.js';
export type { IterateOptions, Chunk, RawChunk } from './iteration.js';
export type { StoreStats, ColumnFamilyStats } from './stats.js';
export { openCheckpointStore, CHECKPOINT_HOLD_MANIFEST_ENV } from '../checkpoint/open.js';
export { CHECKPOINTED_STORE_OPTIONS, DEFAULT_CHECKPOINT_COMPRESSED_WAL_TAIL_BYTES, DEFAULT_CHECKPOINT_WAL_ARCHIVE_SECONDS, DEFAULT_CHECKPOINT_WAL_BYTES_FOR_FLUSH, DEFAULT_CHECKPOINT_WAL_TAIL_BYTES } from '../checkpoint/checkpointStore.js';
export type { OpenCheckpointStoreOptions } from '../checkpoint/open.js';
export type { S3Connection, S3Credentials } from '../checkpoint/s3Http.js';
export { CheckpointFileCache, type CheckpointCacheRetainReport } from '../checkpoint/fileCache.js';
export type {
  CheckpointStore,
  CheckpointDirectory,
  CheckpointManifestHold,
  CheckpointProgress,
  CheckpointPutOptions,
  CheckpointPutReport,
  CheckpointRestoreOptions,
  CheckpointRestoreReport,
  CheckpointWarmReport,
  CheckpointCollectOptions,
  CheckpointCollectReport,
  CheckpointChunk,
  CheckpointFile,
  CheckpointManifest,
} from '../checkpoint/checkpointStore.js';
