/** TypeScript API over the native RocksDB addon (native/). */
export { Store } from './store.js';
export type { ColumnFamilyOptions, StoreOptions, WriteOptions, ReadOptions } from './store.js';
export type { Key, PackedKeys } from './key.js';
export { gatherKeys, packKeys, packedKey } from './key.js';
export { WriteBatch } from './writeBatch.js';
export { IndexedWriteBatch } from './indexedBatch.js';
export { Snapshot } from './snapshot.js';
export { SharedResources } from './resources.js';
export type { SharedResourcesOptions, SharedResourcesUsage } from './resources.js';
export type { IterateOptions, Chunk, RawChunk } from './iteration.js';
export type { StoreStats, ColumnFamilyStats } from './stats.js';
