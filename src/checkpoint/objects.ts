/**
 * Where a checkpoint store keeps its bytes: a flat namespace of named, immutable objects
 * (names are `/`-separated paths relative to the store's root), written whole or not at
 * all. The incremental logic (src/checkpoint/incremental.ts) is written once over this; a
 * directory (`directoryObjects.ts`) and S3 (`s3Objects.ts`) implement it.
 *
 * Internal to src/checkpoint: the public API is `CheckpointStore`.
 */
import type { Readable } from 'node:stream';

/** One object of a listing: its name (relative to the store's root) and size in bytes. */
export interface ListedObject {
  readonly name: string;
  readonly bytes: number;
}

export interface CheckpointObjects {
  /** The store's location as a URL (`file:///DIR`, `s3://BUCKET/PREFIX`), for messages. */
  readonly url: string;
  /** The server that holds the objects, where `url` does not name it (S3: the endpoint's URL); absent for a directory. */
  readonly server?: string;
  /**
   * Stores the local file at `localPath` (of `bytes` bytes) as object `name`, replacing any
   * object of that name. The object is visible under `name` only once complete, and durable
   * once `sync()` has returned after it (a crash before may lose it, never leave it partial).
   * @param options.immutable the local file is never written again (a RocksDB SST file): a
   *   directory on the same filesystem may hard-link it instead of copying it, as RocksDB's own
   *   checkpoints do
   */
  putFile(name: string, localPath: string, bytes: number, options?: { readonly immutable?: boolean }): Promise<void>;
  /**
   * Makes every object `putFile` stored before the call durable: a directory syncs each folder
   * such an object was renamed into (once per put instead of once per file); S3 has nothing to
   * do (a PUT is durable when it returns).
   */
  sync(): Promise<void>;
  /**
   * The path on this machine's filesystem where object `name` is (or would be) a file, for
   * objects that are files (a directory store; absent for S3). A WAL tail put hard-links the
   * store's live log there (`CheckpointFile.link`, "Linked logs" in docs/checkpoints.md) when
   * it is on the same filesystem.
   */
  localPath?(name: string): string;
  /** Stores `bytes` as object `name` (visible only once complete, durable once it returns). */
  putBytes(name: string, bytes: Uint8Array): Promise<void>;
  /**
   * Stores each of `first` as `putBytes` does (in any order), then, once they are all durable,
   * `last` (a WAL tail put's log chunks, then its manifest: the commit point must never be
   * visible before what it lists). A directory does it in one message to a file thread
   * (one round trip instead of one per object); S3 in two steps of PUTs.
   * @throws the first error; objects of `first` stored before it stay (no manifest lists them)
   */
  putAllThen(first: ReadonlyArray<{ readonly name: string; readonly bytes: Uint8Array }>, last: { readonly name: string; readonly bytes: Uint8Array }): Promise<void>;
  /** The whole content of object `name`, or undefined when there is none. */
  getBytes(name: string): Promise<Buffer | undefined>;
  /**
   * `length` bytes of object `name` from byte `offset` (fewer where the object ends before),
   * or undefined when there is none: a part of a group object (`groups.ts`) without the rest.
   */
  getRange(name: string, offset: number, length: number): Promise<Buffer | undefined>;
  /** The content of object `name` as a stream, or undefined when there is none. */
  getStream(name: string): Promise<Readable | undefined>;
  /** Every object whose name starts with `prefix` (a folder path ending in `/`), in no set order. */
  list(prefix: string): Promise<ListedObject[]>;
  /** Deletes the named objects; a name that is already gone is not an error. */
  delete(names: readonly string[]): Promise<void>;
  /** Releases connections (S3); the objects stay. */
  close(): Promise<void>;
}
