/**
 * The native addon (native/build/Release/shardflow_native.node), loaded once per
 * environment, with the src/errors.ts classes handed to it so that native code raises
 * the project's own errors. Internal to src/storage: only the types below cross it.
 *
 * Build it with `npm run build:native` (also run by `npm ci`); native/README.md.
 */
import { createRequire } from 'node:module';
import {
  InvalidArgumentError,
  MergeOperatorMismatchError,
  StoreBusyError,
  StoreClosedError,
  StoreCorruptionError,
  StoreIOError,
  UnknownMergeOperatorError,
} from '../errors.js';

/** Column family config as the native `open` reads it (validated by Store.open first). */
export interface NativeColumnFamily {
  name: string;
  mergeOperator?: { name: string; fields?: Record<string, string>; defaultRule?: string };
  compactionFilter?: { kind: string; field?: string; ttlMs?: number; graceMs?: number; prefixes?: Uint8Array[] };
  prefixLength?: number;
  bloomBitsPerKey?: number;
  memtableInsertHint?: boolean;
  memtableBytes?: number;
}

export interface NativeOpenConfig {
  path: string;
  createIfMissing: boolean;
  walArchiveSeconds?: number;
  walCompression?: boolean;
  resources?: NativeResources;
  columnFamilies: NativeColumnFamily[];
}

export type NativeKey = Uint8Array | string;

/** [keys, keyOffsets, values, valueOffsets, done]: entry i is keys[keyOffsets[i], keyOffsets[i+1]). */
export type NativeChunk = [Buffer, Uint32Array, Buffer | undefined, Uint32Array | undefined, boolean];

export interface NativeSnapshot {
  release(): void;
}

export interface NativeIterator {
  next(maxEntries: number, maxBytes: number): Promise<NativeChunk>;
  close(): void;
}

/** Options of a native iterator: bounds as bytes (see internal/iterationBounds.ts). */
export interface NativeIteratorOptions {
  lower?: Uint8Array;
  upper?: Uint8Array;
  reverse?: boolean;
  keysOnly?: boolean;
  snapshot?: NativeSnapshot;
}

export interface NativeWriteBatch {
  put(cf: number, key: NativeKey, value: NativeKey): void;
  merge(cf: number, key: NativeKey, operand: NativeKey): void;
  mergeMany(cf: number, keys: NativeKey[], operands: Uint8Array[] | Uint8Array): void;
  putPairs(cf: number, firsts: NativeKey[] | NativeKey, seconds: NativeKey[] | NativeKey, values: Uint8Array[] | Uint8Array): void;
  putPairsJoined(cf: number, n: number, first: NativeKey, firstJoined: boolean, second: NativeKey, secondJoined: boolean, values: Uint8Array[], valueIndex: Uint32Array, merge?: boolean, keyOrder?: boolean): void;
  mergeFloat64s(cf: number, keys: NativeKey[], values: Float64Array, stride: number): void;
  mergeFloat64sPacked(cf: number, keyBytes: Uint8Array, keyEnds: Uint32Array, values: Float64Array, stride: number, keyStarts?: Uint32Array): void;
  /** columns: groups of ten (firstBytes, firstEnds, firstStarts, secondBytes, secondEnds, secondStarts, operandBytes, operandEnds, operandStarts, runs). */
  mergePairRuns(cf: number, columns: Array<Uint8Array | Uint32Array | undefined>, lastPerKey: boolean, keyOrder: boolean): void;
  delete(cf: number, key: NativeKey): void;
  deleteRange(cf: number, start: NativeKey, end: NativeKey): void;
  clear(): void;
  count(): number;
  byteSize(): number;
  setSavePoint(): void;
  /** @throws InvalidArgumentError without a save point */
  rollbackToSavePoint(): void;
  /** @throws InvalidArgumentError without a save point */
  popSavePoint(): void;
}

/** `new WriteBatch(store, true)`: a WriteBatchWithIndex whose reads see it on top of the store. */
export interface NativeIndexedBatch extends NativeWriteBatch {
  get(cf: number, key: NativeKey, snapshot?: NativeSnapshot): Promise<Buffer | undefined>;
  iterator(cf: number, options: NativeIteratorOptions): NativeIterator;
}

export interface NativeResources {
  usage(): { budgetBytes: number; blockCacheBytes: number; fixedBytes: number; memtableBytes: number };
}

export interface NativeStats {
  [name: string]: number | Record<string, Record<string, number>>;
  columnFamilies: Record<string, Record<string, number>>;
}

export interface NativeStore {
  /** Resolves to the column family names in index order. */
  open(config: NativeOpenConfig): Promise<string[]>;
  get(cf: number, key: NativeKey, snapshot?: NativeSnapshot): Promise<Buffer | undefined>;
  /** Resolves to [data, lengths]; lengths[i] = -1 when key i is missing. */
  multiGet(cf: number, keys: NativeKey[], snapshot?: NativeSnapshot): Promise<[Buffer, Int32Array]>;
  put(cf: number, key: NativeKey, value: Uint8Array, sync: boolean): Promise<void>;
  merge(cf: number, key: NativeKey, operand: Uint8Array, sync: boolean): Promise<void>;
  delete(cf: number, key: NativeKey, sync: boolean): Promise<void>;
  write(batch: NativeWriteBatch, sync: boolean): Promise<void>;
  flush(): Promise<void>;
  compactRange(cf: number, start?: NativeKey, end?: NativeKey): Promise<void>;
  checkpoint(dir: string, walBytesForFlush?: number): Promise<void>;
  property(name: string, cf?: number): string | undefined;
  stats(): NativeStats;
  snapshot(): NativeSnapshot;
  iterator(cf: number, options: NativeIteratorOptions): NativeIterator;
  close(): Promise<void>;
}

export interface NativeAddon {
  Store: new () => NativeStore;
  WriteBatch: {
    new (store: NativeStore, indexed: true): NativeIndexedBatch;
    new (store: NativeStore, indexed?: false): NativeWriteBatch;
  };
  Resources: new (memoryBudgetBytes: number) => NativeResources;
  setErrorClasses(classes: Record<string, unknown>): void;
  isKnownMergeOperator(name: string): boolean;
  /** The RocksDB version the addon was compiled against, `major.minor.patch`. */
  rocksdbVersion(): string;
  /** bytes[starts[i], ends[i]) for every i, copied one after another. */
  gatherKeys(bytes: Uint8Array, starts: Uint32Array, ends: Uint32Array): Buffer;
  /**
   * Runs a merge operator without a database: "full" = FullMergeV2(existing, operands),
   * "partial" = PartialMergeMulti(operands). For tests and operand inspection.
   */
  evaluateMerge(
    spec: { name: string; fields?: Record<string, string>; defaultRule?: string },
    existing: Uint8Array | undefined,
    operands: Uint8Array[],
    mode: 'full' | 'partial',
  ): { value: Buffer; faults: number };
}

function load(): NativeAddon {
  const require = createRequire(import.meta.url);
  let addon: NativeAddon;
  try {
    addon = require('../../native/build/Release/shardflow_native.node') as NativeAddon;
  } catch (cause) {
    throw new StoreIOError(
      'the shardflow native addon is not built: run `npm run build:native` (needs librocksdb-dev, see native/README.md)',
      { cause },
    );
  }
  addon.setErrorClasses({
    closed: StoreClosedError,
    corruption: StoreCorruptionError,
    io: StoreIOError,
    busy: StoreBusyError,
    unknownMergeOperator: UnknownMergeOperatorError,
    mergeOperatorMismatch: MergeOperatorMismatchError,
    invalidArgument: InvalidArgumentError,
  });
  return addon;
}

/** The addon, loaded on first use (importing src/storage never fails on a missing build). */
export function nativeAddon(): NativeAddon {
  cached ??= load();
  return cached;
}
// The module instance is per environment (worker threads load their own), like the addon.
let cached: NativeAddon | undefined;
