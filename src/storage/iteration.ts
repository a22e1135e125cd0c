import type { Key } from './key.js';
import type { Snapshot } from './snapshot.js';

/**
 * What to iterate. Bounds combine (all given ones apply): `gte`/`gt` from below,
 * `lt`/`lte` from above, `prefix` both. Keys compare bytewise (strings as UTF-8).
 */
export interface IterateOptions {
  gt?: Key;
  gte?: Key;
  lt?: Key;
  lte?: Key;
  prefix?: Key;
  /** Descending key order. Default false. */
  reverse?: boolean;
  /** Entries per native call (and per `chunks()` item). Default 1024. */
  chunkSize?: number;
  /** Bytes of keys+values per native call, beyond which a chunk ends early. Default 8 MiB. */
  chunkBytes?: number;
  /** Read this snapshot instead of the implicit one taken when iteration starts. */
  snapshot?: Snapshot;
  /** Skip values: `chunks()` gives `values: []`, `iterate()` gives empty Buffers. */
  keysOnly?: boolean;
}

/** One `chunks()` item: keys[i] goes with values[i] (both Buffers viewing one chunk buffer). */
export interface Chunk {
  keys: Buffer[];
  values: Buffer[];
}

/**
 * One `rawChunks()` item: entry i's key is `keys[keyOffsets[i] .. keyOffsets[i + 1])`, its
 * value `values[valueOffsets[i] .. valueOffsets[i + 1])`; `count` entries. No per-entry
 * objects: for scans that read most entries in place and keep few.
 */
export interface RawChunk {
  readonly count: number;
  readonly keys: Buffer;
  readonly keyOffsets: ArrayLike<number>;
  readonly values: Buffer;
  readonly valueOffsets: ArrayLike<number>;
}
