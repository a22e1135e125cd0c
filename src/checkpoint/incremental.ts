/**
 * The checkpoint store's logic, written once over `CheckpointObjects` (a directory or S3):
 * content-addressed files, manifests written last, checks on restore, collection.
 * See `CheckpointStore` (checkpointStore.ts) for the contract.
 */
import { Mutex } from 'async-mutex';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { deflateRaw, inflateRaw } from 'node:zlib';
import { CheckpointDamagedError, CheckpointNotFoundError, InvalidArgumentError } from '../errors.js';
import { Store } from '../storage/store.js';
import { DEFAULT_CHECKPOINT_WAL_BYTES_FOR_FLUSH, defaultWalTailBytes } from './checkpointStore.js';
import type {
  CheckpointCollectOptions,
  CheckpointCollectReport,
  CheckpointDirectory,
  CheckpointManifestHold,
  CheckpointPutOptions,
  CheckpointPutReport,
  CheckpointRestoreOptions,
  CheckpointRestoreReport,
  CheckpointStore,
  CheckpointWarmReport,
} from './checkpointStore.js';
import type { CheckpointFileCache } from './fileCache.js';
import { fileThreads, type LogLink, type LogTailResult } from './fileThreads.js';
import { forEachLimit } from './limit.js';
import {
  checkKey,
  checkSequence,
  decodeManifest,
  decodeManifestAndPayload,
  encodeManifest,
  fileObjectName,
  filesPrefix,
  isCheckpointFileName,
  manifestName,
  manifestsPrefix,
  chunkListSha256,
  logLinkName,
  logLinkPrefix,
  objectsOfFile,
  sequenceOfManifest,
  type CheckpointChunk,
  type CheckpointFile,
  type CheckpointManifest,
  type PackedEncoding,
} from './manifest.js';
import type { CheckpointObjects } from './objects.js';
import { mkdirs } from '../storage/mkdirs.js';
import {
  decodeGroupHeader,
  encodeGroup,
  entriesOfGroup,
  groupDamaged,
  groupEntryName,
  groupName,
  GROUP_NAME_MAX,
  groupsPrefix,
  headerKey,
  splitKey,
  type GroupEntry,
  type GroupHeader,
} from './groups.js';

const deflateRawAsync = promisify(deflateRaw);
const inflateRawAsync = promisify(inflateRaw);
/** Packed bytes from which a tail put deflates them (below, the request costs more than the bytes). */
const PACKED_DEFLATE_MIN_BYTES = 4096;

/** Files stored or fetched at once. */
const TRANSFER_CONCURRENCY = 4;
/** Payloads of packed chunks a restore fetches at once ahead of writing them (`#prefetchPayloads`). */
const PAYLOAD_PREFETCH = 8;
/** Files of a local checkpoint stat'ed (and hashed, when new) at once when it is described. */
const DESCRIBE_CONCURRENCY = 8;
/** Entries of the hash cache before it is emptied (one per live SST file is the norm). */
const HASH_CACHE_LIMIT = 100_000;
/** RocksDB files never rewritten once written (table and blob files): their hashes are cached. */
const IMMUTABLE_FILE = /^\d+\.(sst|blob)$/;
/** A RocksDB write-ahead log file (`<number>.log`, the number growing with each new log). */
const WAL_FILE = /^(\d+)\.log$/;
/** Chunks of one WAL file in a chain of tail puts before a put stores the store whole again (bounds a restore's fetches). */
const MAX_WAL_CHUNKS = 256;
/**
 * The share of `walTailBytes` a chain's tail puts store before the base of the next chain is
 * made in the background (`#materialize`), and the share more after a try that made none.
 */
const REBASE_SHARE = 0.75;
const REBASE_RETRY_SHARE = 0.0625;
/**
 * How far past `walTailBytes` a chain's tail puts go on before a put is whole: 2x. The limit is
 * where a chain should end (its base made from `REBASE_SHARE` of it); a burst of writes between
 * two puts (on cnr-2000, the end of the graph load: more than 16 MiB of log in one interval), or
 * a base not made yet, would otherwise end the chain with a whole put (a flush, a describe, the
 * new SST files stored: 0.4 to 0.9 s) on the path of whatever waits for that checkpoint. It
 * bounds what a restore replays: at most twice `walTailBytes` of log after the chain's base.
 */
const WAL_TAIL_OVERSHOOT = 2;
/** Bytes of a group object read first for its header (`#groupHeader`): the header of 21 entries takes about 1.5 KB. */
const GROUP_HEAD_BYTES = 4096;
/** Group objects' headers kept (`#groupHeaders`) before the oldest are forgotten. */
const GROUP_HEADERS_KEPT = 4096;

/** A group object of a listing (`#listGroups`): its name and entries. */
interface ListedGroup {
  readonly name: string;
  readonly entries: readonly GroupEntry[];
}

/** Most a group commit waits for the parent's tail puts under way before it stores what waits (`#scheduleGroups`), ms. */
const GROUP_LINGER_MS = 20;

/** A parent's group commit: the puts waiting, whether an object is being stored, the linger's timer. */
interface GroupQueue {
  readonly waiting: GroupWaiter[];
  running: boolean;
  linger?: NodeJS.Timeout;
}

/** A tail put on its way to its parent's group commit (`#arriving`). */
interface GroupArrival {
  readonly parent: string;
  done: boolean;
}

/** A tail put waiting for its parent's group commit (`#groupCommit`). */
interface GroupWaiter extends GroupEntry {
  readonly key: string;
  readonly bytes: Buffer;
  readonly resolve: (stored: { readonly name: string; readonly manifests: number }) => void;
  readonly reject: (err: unknown) => void;
}

/** Every how many collects of a key one lists its stored files instead of trusting this process's listing (see `collect`). */
const COLLECT_LISTS_EVERY = 16;
/** Deletes a collect sends before it checks its signal again (an abort waits for at most one slice). */
const COLLECT_DELETE_SLICE = 16;

/**
 * A chain of WAL tail puts of one open `Store` under one key: what the key's latest
 * checkpoint (put by this process from this store) holds, so that the next put can store
 * only what the store's live write-ahead log gained since (docs/checkpoints.md, "WAL tail
 * puts").
 */
interface WalChain {
  readonly key: string;
  /** The key's latest checkpoint, which this chain's last put wrote. */
  sequence: number;
  /** Its files. */
  files: CheckpointFile[];
  /** Name of the newest WAL file it holds (or begins at): the store's live log at its last put. */
  wal: string;
  /** Bytes of that WAL it holds (a prefix of the file), and their chunks. */
  walBytes: number;
  chunks: CheckpointChunk[];
  /** The object that WAL is hard-linked as, when the chain's manifest names its chunks there (`CheckpointFile.link`). */
  link?: string;
  /** Log bytes the chain's tail puts stored since its base (bounded by twice `walTailBytes`, `WAL_TAIL_OVERSHOOT`). */
  logged: number;
  /** `logged` from which the next chain's base is made in the background (`#materialize`); undefined: at `REBASE_SHARE` of the limit. */
  rebaseAt?: number;
}

/** Where a chain of WAL tail puts begins on top of a checkpoint's files: a log, the bytes of it the files hold, and their chunks. */
interface ChainStart {
  readonly wal: string;
  readonly walBytes: number;
  readonly chunks: CheckpointChunk[];
}

/**
 * The base of a store's next chain of WAL tail puts, made in the background while the chain
 * goes on (`#materialize`): a local RocksDB checkpoint (which flushes the memtables) whose
 * files are stored, without a manifest. The next tail put of the key writes its manifest with
 * these files and the logs from `start` on, and the chain begins again from there.
 */
interface Materialization {
  readonly key: string;
  /** The objects `collect` keeps for it (`#unnamed`), from when they are known until it is dropped. */
  names?: string[];
  /** The base, once its files are durable in the checkpoint store (undefined until then, or for good when none could be made). */
  base?: {
    readonly files: CheckpointFile[];
    readonly start: ChainStart;
    /** The objects of `files` this materialization stored, and their bytes (the others were stored before it: the put that adopts the base checks they still are). */
    readonly objects: Map<string, number>;
  };
}

/** The number of a write-ahead log file's name (`000123.log` -> 123). */
const walNumber = (name: string): number => Number(WAL_FILE.exec(name)![1]);

/** The write-ahead log files in `dir` numbered at least `from` (0 by default), oldest first. */
async function walFiles(dir: string, from = 0): Promise<string[]> {
  const found = (await readdir(dir)).filter((name) => WAL_FILE.test(name) && walNumber(name) >= from);
  return found.sort((x, y) => walNumber(x) - walNumber(y));
}

/** The files of `files` not stored yet under `key` (by object name; `stored`: object name to bytes), each object once. */
function notStored(key: string, files: readonly CheckpointFile[], stored: ReadonlyMap<string, number>): Map<string, CheckpointFile> {
  const out = new Map<string, CheckpointFile>();
  for (const f of files) {
    const name = fileObjectName(key, f.sha256);
    if (stored.get(name) !== f.bytes) out.set(name, f);
  }
  return out;
}

/**
 * What the key's stored files are, as this process last listed or wrote them: valid while the
 * key's latest manifest is `latest` (this process's last put, or the one seen at the listing),
 * since only the key's owner puts and collects (`CheckpointStore`, "one writer per key").
 */
interface StoredListing {
  readonly latest: number | undefined;
  /** Object name (`<key>/files/<sha256>`) to bytes. */
  readonly files: Map<string, number>;
}

/**
 * Removes the staging folders (`<prefix><pid>-...`) that processes no longer running left
 * behind (killed mid-put): they hold hard links to SST files the store has since deleted,
 * whose disk space would otherwise never come back.
 */
async function removeDeadStaging(stagingDir: string, prefix: string): Promise<void> {
  for (const name of await readdir(stagingDir)) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(name.slice(prefix.length).split('-')[0]);
    if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid || isRunning(pid)) continue;
    await rm(path.join(stagingDir, name), { recursive: true, force: true });
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // alive, another user's
  }
}

export class IncrementalCheckpointStore implements CheckpointStore {
  readonly url: string;
  readonly location: string;
  readonly #locks = new Map<string, Mutex>();
  /**
   * SHA-256 of SST and blob files already hashed, by device, inode, size and mtime: a
   * checkpoint's SST files are hard links to the store's, so each immutable SST is read once
   * per process, not once per checkpoint. Only those: the WAL, `MANIFEST-*`, `CURRENT` and
   * `OPTIONS-*` of a checkpoint are fresh copies, whose inode a later copy may reuse with the
   * same size and mtime (coarse timestamps) but other content, so they are hashed every time.
   */
  readonly #hashes = new Map<string, string>();
  /** Puts that stored at least one file, for the manifest-hold test hook. */
  #storingPuts = 0;
  /**
   * Per key, its stored files as of its latest manifest (StoredListing), so that a put lists
   * them only when another writer put since (an owner that changed): a listing of a directory
   * store is a readdir and a stat per stored file, on the libuv pool every put shares.
   */
  readonly #listings = new Map<string, StoredListing>();
  /**
   * Per open `Store`, the name, size and SHA-256 of the immutable files (SST, blob) of its
   * earlier local checkpoints: RocksDB never gives two files of one open database the same
   * number, so a name seen before in a checkpoint of the same `Store` object is the same file
   * (a hard link to it), and needs neither a stat nor a hash again.
   */
  readonly #immutableByStore = new WeakMap<Store, Map<string, CheckpointFile>>();
  /** Per open `Store`, the chain of WAL tail puts its latest put began (WalChain). */
  readonly #walChains = new WeakMap<Store, WalChain>();
  /** Per open `Store`, the id in the names of its linked logs (`logLinkName`): a reopened store's logs reuse numbers. */
  readonly #linkIds = new WeakMap<Store, string>();
  /** Per open `Store`, the base of its next chain being made or made (Materialization). */
  readonly #materializations = new WeakMap<Store, Materialization>();
  /**
   * Per key, the objects of bases being made or not yet named by a manifest, with how many
   * bases hold each: `collect` keeps them (it removes every object no manifest names).
   */
  readonly #unnamed = new Map<string, Map<string, number>>();
  /**
   * Per key, the manifests this process put (by sequence), for `collect` to read the kept ones
   * without a fetch: a manifest is written once and never changed. Pruned by `collect`.
   */
  readonly #ownManifests = new Map<string, Map<number, CheckpointManifest>>();
  /** Per key, the collects made so far (every COLLECT_LISTS_EVERY-th lists the stored files). */
  readonly #collects = new Map<string, number>();
  /** Bases being made (`#startMaterialization`). */
  readonly #background = new Set<Promise<void>>();
  /**
   * Per key, the objects its manifests are in, by sequence, as last listed or put: its own
   * manifest object, or a group object (docs/checkpoints.md, "Group commits"). A sequence
   * not here is looked for in its own object first.
   */
  readonly #locations = new Map<string, Map<number, string>>();
  /** Per parent key, the tail puts waiting for its next group commit, and whether one is being stored. */
  readonly #groupQueues = new Map<string, GroupQueue>();
  /** Per parent key, the fenced writer's tail puts that will go to its group commit and are not there yet (`#arriving`). */
  readonly #onTheWay = new Map<string, number>();
  /** Headers of group objects read so far (`#groupHeader`), oldest first; undefined for an object found gone. */
  readonly #groupHeaders = new Map<string, Promise<GroupHeader | undefined>>();
  /**
   * Per key, the lowest sequence its latest collect in this process kept or used: its
   * entries in group objects below it are collected (beside the floors in the group objects'
   * names, which every process sees).
   */
  readonly #floors = new Map<string, number>();
  /** Group objects this process is deleting (so that concurrent collects of its keys do not delete them twice). */
  readonly #deletingGroups = new Set<string>();

  /** @param hold the manifest-hold test hook (`CheckpointManifestHold`); none by default */
  constructor(private readonly objects: CheckpointObjects, private readonly hold?: CheckpointManifestHold) {
    this.url = objects.url;
    this.location = objects.server ? `${objects.url} at ${objects.server}` : objects.url;
  }

  #lock(key: string): Mutex {
    let m = this.#locks.get(key);
    if (!m) this.#locks.set(key, (m = new Mutex()));
    return m;
  }

  async list(key: string): Promise<number[]> {
    checkKey(key);
    return [...(await this.#locate(key)).keys()].sort((a, b) => a - b);
  }

  /**
   * The key's checkpoints, by sequence, with the object each manifest is in: the key's own
   * manifests and its live entries in the group objects of its parent (an entry below its
   * key's floor is collected: left out). Remembered in `#locations`.
   * @param groups the parent's group objects, when the caller listed them already
   */
  async #locate(key: string, groups?: readonly ListedGroup[]): Promise<Map<number, string>> {
    const split = splitKey(key);
    const [own, listedGroups] = await Promise.all([
      this.objects.list(manifestsPrefix(key)),
      groups ?? (split ? this.#listGroups(split.parent) : []),
    ]);
    const out = new Map<number, string>();
    if (split) {
      const floors = this.#groupFloors(split.parent, listedGroups);
      const floor = floors.get(split.leaf) ?? 0;
      for (const g of listedGroups) for (const e of g.entries) if (e.leaf === split.leaf && e.sequence >= floor) out.set(e.sequence, g.name);
    }
    for (const o of own) {
      const s = sequenceOfManifest(key, o.name);
      if (s !== undefined) out.set(s, o.name); // its own object first, where both are
    }
    this.#locations.set(key, out);
    return out;
  }

  /** The group objects of the keys under `parent` (names this format does not make are not listed). */
  async #listGroups(parent: string): Promise<ListedGroup[]> {
    const out: ListedGroup[] = [];
    for (const o of await this.objects.list(groupsPrefix(parent))) {
      const entries = entriesOfGroup(parent, o.name);
      if (entries) out.push({ name: o.name, entries });
    }
    return out;
  }

  /**
   * Per leaf of `parent`, its floor: the floor of its newest entry in `groups`, or of this
   * process's latest collect of it, whichever is higher (both are lower bounds of the lowest
   * sequence its collects keep from now on: kept checkpoints only get newer).
   */
  #groupFloors(parent: string, groups: readonly ListedGroup[]): Map<string, number> {
    const newest = new Map<string, GroupEntry>();
    for (const g of groups) for (const e of g.entries) if ((newest.get(e.leaf)?.sequence ?? -1) < e.sequence) newest.set(e.leaf, e);
    const out = new Map<string, number>();
    for (const [leaf, e] of newest) out.set(leaf, Math.max(e.floor, this.#floors.get(`${parent}/${leaf}`) ?? 0));
    return out;
  }

  /** Remembers where manifest `sequence` of `key` is stored (`#locations`). */
  #located(key: string, sequence: number, name: string): void {
    let m = this.#locations.get(key);
    if (!m) this.#locations.set(key, (m = new Map()));
    m.set(sequence, name);
  }

  /**
   * The bytes of the key's manifest of `sequence` (its JSON and packed chunks, as its own
   * object holds them), from its own object or its group object; undefined when there is none.
   * @throws CheckpointDamagedError when its group object's header is damaged
   */
  async #manifestBytes(key: string, sequence: number): Promise<Buffer | undefined> {
    const own = manifestName(key, sequence);
    let where = this.#locations.get(key)?.get(sequence);
    for (let attempt = 0; attempt < 2; attempt++) {
      const bytes = where === undefined || where === own ? await this.objects.getBytes(own) : await this.#groupEntry(where, key, sequence);
      if (bytes !== undefined || !splitKey(key)) return bytes;
      // Not where it was: listed again (a collect or a remove may have moved or removed it).
      const again = (await this.#locate(key)).get(sequence);
      if (again === undefined || again === where || (where === undefined && again === own)) return undefined;
      where = again;
    }
    return undefined;
  }

  /** The bytes of the manifest of `key` at `sequence` in group object `name` (a range of it); undefined when the object is gone. */
  async #groupEntry(name: string, key: string, sequence: number): Promise<Buffer | undefined> {
    const header = await this.#groupHeader(name, key, sequence);
    if (!header) return undefined;
    const at = header.get(headerKey(splitKey(key)!.leaf, sequence));
    if (!at) throw groupDamaged(name, key, sequence, 'its header does not list this checkpoint');
    const bytes = await this.objects.getRange(name, at[0], at[1]);
    if (bytes !== undefined && bytes.length !== at[1]) throw groupDamaged(name, key, sequence, `it ends before the manifest's ${at[1]} bytes at ${at[0]}`);
    return bytes;
  }

  /** The header of group object `name` (read once per process: objects are never rewritten); undefined when it is gone. */
  #groupHeader(name: string, key: string, sequence: number): Promise<GroupHeader | undefined> {
    let p = this.#groupHeaders.get(name);
    if (!p) {
      p = (async () => {
        let head = await this.objects.getRange(name, 0, GROUP_HEAD_BYTES);
        if (head === undefined) return undefined;
        if (head.length === GROUP_HEAD_BYTES && head.indexOf(0x0a) < 0) head = await this.objects.getBytes(name);
        if (head === undefined) return undefined;
        try {
          const header = decodeGroupHeader(head);
          if (!header) throw new Error('no header line');
          return header;
        } catch (err) {
          throw groupDamaged(name, key, sequence, (err as Error).message);
        }
      })();
      p.then((h) => { if (!h) this.#groupHeaders.delete(name); }, () => this.#groupHeaders.delete(name));
      this.#groupHeaders.set(name, p);
      if (this.#groupHeaders.size > GROUP_HEADERS_KEPT) this.#groupHeaders.delete(this.#groupHeaders.keys().next().value!);
    }
    return p;
  }

  /** Remembers a manifest this process stored (`#ownManifests`). */
  #ownManifest(manifest: CheckpointManifest): void {
    let own = this.#ownManifests.get(manifest.key);
    if (!own) this.#ownManifests.set(manifest.key, (own = new Map()));
    own.set(manifest.sequence, manifest);
  }

  async #manifest(key: string, sequence: number): Promise<CheckpointManifest | undefined> {
    const bytes = await this.#manifestBytes(key, sequence);
    return bytes === undefined ? undefined : decodeManifest(key, sequence, bytes);
  }

  async latest(key: string): Promise<CheckpointManifest | undefined> {
    const seqs = await this.list(key);
    return seqs.length === 0 ? undefined : this.#manifest(key, seqs[seqs.length - 1]!);
  }

  async put(key: string, source: Store | CheckpointDirectory, sequence: number, options: CheckpointPutOptions = {}): Promise<CheckpointPutReport> {
    checkKey(key);
    checkSequence(sequence);
    return this.#lock(key).runExclusive(() => this.#put(key, source, sequence, options));
  }

  async #put(key: string, source: Store | CheckpointDirectory, sequence: number, options: CheckpointPutOptions): Promise<CheckpointPutReport> {
    const { signal, onProgress } = options;
    signal?.throwIfAborted();
    const t0 = performance.now();
    // A WAL tail put's read of the logs goes side by side with the listing of the manifests
    // (each a message to a file thread); it is dropped if the listing says the chain is not
    // the key's latest checkpoint.
    const chain = source instanceof Store ? this.#walChains.get(source) : undefined;
    // A fenced writer's chain is the key's latest checkpoint as long as this process's record
    // says so: no other writer puts at or above its sequences (`CheckpointPutOptions.fencedWriter`).
    const trusted = options.fencedWriter === true && chain !== undefined && chain.key === key && this.#listings.get(key)?.latest === chain.sequence;
    const listed = trusted ? Promise.resolve([chain.sequence]) : this.list(key);
    // A base made in the background (`#materialize`): this tail put begins the next chain on it.
    const materialization = source instanceof Store ? this.#materializations.get(source) : undefined;
    const base = chain && chain.key === key && materialization?.key === key ? materialization.base : undefined;
    const read = base ? { key, sequence: chain!.sequence, files: base.files, wal: base.start.wal, walBytes: base.start.walBytes, chunks: base.start.chunks, logged: 0 } : chain;
    const tailRead = read && read.key === key ? this.#readWalTail(source as Store, read, options) : undefined;
    tailRead?.catch(() => undefined); // awaited below, or dropped
    const seqs = await listed;
    const last = seqs[seqs.length - 1];
    if (last !== undefined && last >= sequence) {
      throw new InvalidArgumentError(`checkpoint ${key}@${sequence}: the sequence number must be above the latest checkpoint's (${last}) in ${this.url}`);
    }
    // The key's stored files: this process's listing when no other writer put since, else
    // listed while the local checkpoint is made and described (only this put, under the
    // key's lock, adds to them meanwhile). Forgotten until the manifest is stored, so that a
    // put that fails part way lists again next time.
    const known = this.#listings.get(key);
    this.#listings.delete(key);
    const listing = known && known.latest === last
      ? Promise.resolve(known.files)
      : this.objects.list(filesPrefix(key)).then((listed) => new Map(listed.map((o) => [o.name, o.bytes])));
    listing.catch(() => undefined); // awaited below; a failure before that must not go unhandled
    if (source instanceof Store) {
      this.#walChains.delete(source); // set again by a put that succeeds
      if (chain && read && tailRead && chain.sequence === last) {
        // On its way to the parent's group commit, which waits for it (`#scheduleGroups`).
        const arrival = options.groupCommit && options.fencedWriter ? this.#arriving(key) : undefined;
        try {
          let tail = await this.#putWalTail(key, source, sequence, read, await tailRead, listing, options, t0, base?.objects, arrival);
          if (base) {
            // Named by the manifest now, or of no use: the base's logs are gone (or its files).
            this.#dropMaterialization(source, materialization!);
            if (!tail) {
              const again = this.#readWalTail(source, chain, options);
              if (again) tail = await this.#putWalTail(key, source, sequence, chain, await again, listing, options, t0, undefined, arrival);
            }
          }
          if (tail) return tail;
        } finally {
          if (arrival) this.#arrived(arrival);
        }
      }
      // A whole put: a base being made for the chain that ends here is of no use.
      if (materialization) this.#dropMaterialization(source, materialization);
    }
    let dir: string;
    let staged: string | undefined;
    let immutable: Map<string, CheckpointFile> | undefined;
    if (source instanceof Store) {
      staged = await this.#localCheckpoint(source, options, String(sequence));
      dir = staged;
      immutable = this.#immutableOf(source);
    } else {
      dir = source.directory;
    }
    try {
      const checkpointSeconds = staged ? (performance.now() - t0) / 1000 : 0;
      const t1 = performance.now();
      const files = await this.#describe(dir, immutable);
      const stored = await listing;
      const toUpload = notStored(key, files, stored);
      const bytes = files.reduce((s, f) => s + f.bytes, 0);
      onProgress?.({ kind: 'checkpointed', files: files.length, bytes, toUpload: toUpload.size });
      let uploadedBytes = 0;
      // A store's SST files (linked by RocksDB into the local checkpoint) are never written
      // again; the files of a directory handed in are the caller's.
      await this.#storeFiles(dir, toUpload, staged !== undefined, {
        signal,
        onStored: (f) => {
          uploadedBytes += f.bytes;
          onProgress?.({ kind: 'uploaded', file: f.name, bytes: f.bytes });
        },
      });
      signal?.throwIfAborted();
      await this.#holdManifest(key, sequence, toUpload.size, signal);
      const manifest: CheckpointManifest = {
        key,
        sequence,
        createdAt: new Date().toISOString(),
        files,
        bytes,
        metadata: options.metadata ?? new Uint8Array(0),
      };
      // Last: the checkpoint exists from here on.
      await this.objects.putBytes(manifestName(key, sequence), encodeManifest(manifest));
      for (const [name, f] of toUpload) stored.set(name, f.bytes);
      this.#listings.set(key, { latest: sequence, files: stored });
      this.#ownManifest(manifest);
      if (source instanceof Store) await this.#startWalChain(key, source, sequence, files, options);
      return {
        manifest,
        files: files.length,
        bytes,
        uploadedFiles: toUpload.size,
        uploadedBytes,
        checkpointSeconds,
        uploadSeconds: (performance.now() - t1) / 1000,
        walTail: false,
        groupedManifests: 1,
      };
    } finally {
      if (staged) await rm(staged, { recursive: true, force: true });
    }
  }

  /**
   * The floor of `manifest` in a group object's name (`GroupEntry.floor`): the lowest
   * sequence among it and the `keep - 1` newest manifests before it that this process put,
   * and the manifests whose packed chunks they read; 0 when this process knows fewer (the
   * key's other checkpoints are not known). Only a fenced writer groups its puts, so no other
   * writer put between them.
   */
  #groupFloor(manifest: CheckpointManifest, keep: number): number {
    const own = this.#ownManifests.get(manifest.key);
    const before = [...(own?.keys() ?? [])].filter((s) => s < manifest.sequence).sort((a, b) => b - a).slice(0, keep - 1);
    if (before.length < keep - 1) return 0;
    let floor = manifest.sequence;
    for (const m of [manifest, ...before.map((s) => own!.get(s)!)]) {
      floor = Math.min(floor, m.sequence);
      for (const f of m.files) for (const c of f.chunks ?? []) if (c.in !== undefined) floor = Math.min(floor, c.in);
    }
    return floor;
  }

  /**
   * Stores `bytes`, the manifest of `key` at `sequence`, with the manifests of the parent's
   * other keys that wait meanwhile: one object for all (a group object, `groups.ts`), or the
   * key's own manifest object when it is alone. The first waits for the I/O callbacks already
   * due (`setImmediate`); the others wait for the object being stored before theirs, as a
   * database's group commit does. A failure fails every put of the object.
   * @returns the name of the object that holds the manifest, and how many manifests it holds
   */
  #groupCommit(key: string, sequence: number, floor: number, bytes: Buffer, arrival?: GroupArrival): Promise<{ readonly name: string; readonly manifests: number }> {
    const { parent, leaf } = splitKey(key)!;
    const queue = this.#groupQueue(parent);
    return new Promise((resolve, reject) => {
      queue.waiting.push({ key, leaf, sequence, floor, bytes, resolve, reject });
      if (arrival) this.#arrived(arrival);
      this.#scheduleGroups(parent, queue);
    });
  }

  #groupQueue(parent: string): GroupQueue {
    let q = this.#groupQueues.get(parent);
    if (!q) this.#groupQueues.set(parent, (q = { waiting: [], running: false }));
    return q;
  }

  /** A tail put of `key` on its way to its parent's group commit: counted until it arrives or gives up (`#arrived`). */
  #arriving(key: string): GroupArrival {
    const parent = splitKey(key)?.parent ?? '';
    this.#onTheWay.set(parent, (this.#onTheWay.get(parent) ?? 0) + 1);
    return { parent, done: false };
  }

  /** The put of `arrival` is in its parent's queue, or will not be: the group commit waits for it no longer. */
  #arrived(arrival: GroupArrival): void {
    if (arrival.done) return;
    arrival.done = true;
    const n = (this.#onTheWay.get(arrival.parent) ?? 1) - 1;
    if (n > 0) this.#onTheWay.set(arrival.parent, n);
    else this.#onTheWay.delete(arrival.parent);
    const q = this.#groupQueues.get(arrival.parent);
    if (q) this.#scheduleGroups(arrival.parent, q);
  }

  /**
   * Starts storing what waits in `queue` unless an object is being stored (its loop takes
   * them next): at once when no other tail put of the parent is on its way here (reading its
   * log), else when the last of them arrives or after `GROUP_LINGER_MS`, so that the
   * partitions that checkpoint together at the end of a round share an object (Kafka's
   * `linger.ms`, bounded by the puts actually under way: a put alone never waits).
   */
  #scheduleGroups(parent: string, queue: GroupQueue): void {
    if (queue.running || queue.waiting.length === 0) return;
    const start = () => {
      if (queue.linger) clearTimeout(queue.linger);
      queue.linger = undefined;
      if (queue.running || queue.waiting.length === 0) return;
      queue.running = true;
      setImmediate(() => void this.#storeGroups(parent, queue));
    };
    if ((this.#onTheWay.get(parent) ?? 0) === 0) start();
    else queue.linger ??= setTimeout(start, GROUP_LINGER_MS);
  }

  /** Stores what waits in `queue` (`#groupCommit`), one object at a time, until nothing waits. */
  async #storeGroups(parent: string, queue: GroupQueue): Promise<void> {
    const max = GROUP_NAME_MAX;
    while (queue.waiting.length > 0) {
      const batch = [queue.waiting.shift()!];
      let length = groupEntryName(batch[0]!).length;
      while (queue.waiting.length > 0 && length + 1 + groupEntryName(queue.waiting[0]!).length <= max) {
        const next = queue.waiting.shift()!;
        length += 1 + groupEntryName(next).length;
        batch.push(next);
      }
      const alone = batch.length === 1;
      const name = alone ? manifestName(batch[0]!.key, batch[0]!.sequence) : groupName(parent, batch);
      try {
        await this.objects.putBytes(name, alone ? batch[0]!.bytes : encodeGroup(batch, batch.map((e) => e.bytes)));
        for (const e of batch) e.resolve({ name, manifests: batch.length });
      } catch (err) {
        for (const e of batch) e.reject(err);
      }
    }
    queue.running = false;
    this.#scheduleGroups(parent, queue);
  }

  /**
   * The manifest-hold test hook (`CheckpointManifestHold`), for a whole or a tail put that
   * stored `stored` files: the hook's put waits its `ms` after saying so on stderr.
   */
  async #holdManifest(key: string, sequence: number, stored: number, signal: AbortSignal | undefined): Promise<void> {
    if (!this.hold || stored === 0 || ++this.#storingPuts !== this.hold.afterPuts) return;
    process.stderr.write(`shardflow test hook: checkpoint ${this.url} ${key}@${sequence}: ${stored} files stored, manifest held ${this.hold.ms} ms\n`);
    await new Promise((r) => setTimeout(r, this.hold!.ms));
    signal?.throwIfAborted();
  }

  /**
   * After a whole put of `source`: begins a chain of WAL tail puts on the checkpoint's newest
   * WAL file, or (a checkpoint that flushed) on the store's live log from its byte 0, when
   * tail puts are on. Never throws: without a chain the next put is whole.
   */
  async #startWalChain(key: string, source: Store, sequence: number, files: CheckpointFile[], options: CheckpointPutOptions): Promise<void> {
    if ((options.walTailBytes ?? defaultWalTailBytes(source)) <= 0) return;
    const start = await this.#chainStart(source, files);
    if (start) this.#walChains.set(source, { key, sequence, files, ...start, logged: 0 });
  }

  /**
   * Where a chain of WAL tail puts begins on top of a local checkpoint's `files` of `source`:
   * the checkpoint's newest WAL file at the size it holds, or (a checkpoint that flushed) the
   * store's live log from its byte 0; undefined when that cannot be known (never throws).
   */
  async #chainStart(source: Store, files: CheckpointFile[]): Promise<ChainStart | undefined> {
    let wal: CheckpointFile | undefined;
    for (const f of files) {
      const m = WAL_FILE.exec(f.name);
      if (m && (!wal || Number(m[1]) > walNumber(wal.name))) wal = f;
    }
    if (!wal) {
      // The checkpoint flushed, and RocksDB leaves the new live log out while it is empty. That
      // log is the store's newest if its number is below the flush's SST files': RocksDB numbers
      // logs and tables from one counter, and switches the log before the flush numbers its
      // tables, so a log made by a later switch has a higher number than all of them. Then
      // every byte of it came after the checkpoint, and the chain begins at its byte 0.
      let flushed = -1;
      for (const f of files) if (IMMUTABLE_FILE.test(f.name)) flushed = Math.max(flushed, Number(f.name.split('.')[0]));
      let live: string | undefined;
      try {
        live = (await walFiles(source.path)).at(-1);
      } catch {
        return undefined;
      }
      if (live === undefined || walNumber(live) >= flushed) return undefined;
      return { wal: live, walBytes: 0, chunks: [] };
    }
    return { wal: wal.name, walBytes: wal.bytes, chunks: [{ bytes: wal.bytes, sha256: wal.sha256 }] };
  }

  /**
   * Makes the base of `chain`'s successor in the background (Materialization): Flink's
   * changelog state backend materializes its state the same way, periodically and off the
   * checkpoints' path, and truncates the changelog to what came after (FLIP-158). Without
   * it the chain ends at `walTailBytes` with a whole put (a flush, a describe, the new SST
   * files stored) on the path of whatever waits for that checkpoint: on cnr-2000 those were
   * 400 to 900 ms on about a third of the metric rounds' slowest replies. A try that makes no
   * base (the store closed, an error, no chain start known after its flush) is tried again
   * after `REBASE_RETRY_SHARE` of the limit more.
   */
  #startMaterialization(key: string, source: Store, chain: WalChain, options: CheckpointPutOptions, limit: number): void {
    const m: Materialization = { key };
    this.#materializations.set(source, m);
    const running: Promise<void> = this.#materialize(key, source, m, options).then((made) => {
      this.#background.delete(running);
      if (made) return;
      this.#dropMaterialization(source, m);
      chain.rebaseAt = chain.logged + limit * REBASE_RETRY_SHARE;
    });
    this.#background.add(running);
  }

  /** Resolves once no base is being made in the background (`#startMaterialization`); `close` waits for it too. */
  async settled(): Promise<void> {
    while (this.#background.size > 0) await Promise.all([...this.#background]);
  }

  /**
   * The work of `#startMaterialization`: a local checkpoint of `source` (flushing above
   * `walBytesForFlush`), described; its files stored (those not stored yet) and synced, with
   * `collect` told to keep them (`#unnamed`) until a manifest names them or the base is
   * dropped. Never throws.
   * @returns whether `m.base` was set
   */
  async #materialize(key: string, source: Store, m: Materialization, options: CheckpointPutOptions): Promise<boolean> {
    let staged: string | undefined;
    try {
      staged = await this.#localCheckpoint(source, options, 'base');
      const files = await this.#describe(staged, this.#immutableOf(source));
      const start = await this.#chainStart(source, files);
      if (!start || this.#materializations.get(source) !== m) return false;
      const names = [...new Set(files.flatMap((f) => objectsOfFile(key, f)))];
      this.#keepUnnamed(key, names, 1);
      m.names = names;
      const known = this.#listings.get(key)?.files ?? new Map((await this.objects.list(filesPrefix(key))).map((o) => [o.name, o.bytes]));
      const objects = new Map<string, number>();
      await this.#storeFiles(staged, notStored(key, files, known), true, { onStored: (f, name) => objects.set(name, f.bytes) });
      if (this.#materializations.get(source) !== m) return false;
      m.base = { files, start, objects };
      return true;
    } catch {
      return false; // the chain goes on; the next try, or a whole put at its limit
    } finally {
      if (staged) await rm(staged, { recursive: true, force: true }).catch(() => undefined);
    }
  }

  /**
   * A local RocksDB checkpoint of `source` (`Store.checkpoint`, flushing above
   * `walBytesForFlush`) in a new folder of `stagingDir` (default: the store's parent, so that
   * SST files are hard links), named `.checkpoint-<store folder>-<pid>-<tag>-<random>` (the
   * form `removeDeadStaging` reads), after removing the folders of dead processes there.
   * @returns the folder (the caller removes it)
   * @throws the store's errors (StoreClosedError, I/O)
   */
  async #localCheckpoint(source: Store, options: CheckpointPutOptions, tag: string): Promise<string> {
    const stagingDir = options.stagingDir ?? path.dirname(source.path);
    const prefix = `.checkpoint-${path.basename(source.path)}-`;
    const staged = path.join(stagingDir, `${prefix}${process.pid}-${tag}-${randomBytes(4).toString('hex')}`);
    await mkdirs(stagingDir);
    await removeDeadStaging(stagingDir, prefix);
    await source.checkpoint(staged, { walBytesForFlush: options.walBytesForFlush ?? DEFAULT_CHECKPOINT_WAL_BYTES_FOR_FLUSH });
    return staged;
  }

  /** The descriptions of `source`'s immutable files (`#immutableByStore`), made on first use. */
  #immutableOf(source: Store): Map<string, CheckpointFile> {
    let immutable = this.#immutableByStore.get(source);
    if (!immutable) this.#immutableByStore.set(source, (immutable = new Map()));
    return immutable;
  }

  /**
   * Stores each file of `dir` in `toStore` (object name to file), TRANSFER_CONCURRENCY at a
   * time, then makes them durable (`CheckpointObjects.sync`: one folder sync in a directory),
   * before any manifest may name them.
   * @param fromStore `dir` is a local checkpoint of a store: its SST and blob files, never
   *   written again, may be hard-linked (`putFile`'s `immutable`)
   * @param options.signal checked before each file
   * @param options.onStored called as each file is stored
   * @throws the abort reason; what `onStored` throws; the checkpoint store's errors
   */
  async #storeFiles(dir: string, toStore: ReadonlyMap<string, CheckpointFile>, fromStore: boolean, options: { readonly signal?: AbortSignal; readonly onStored: (f: CheckpointFile, name: string) => void }): Promise<void> {
    await forEachLimit([...toStore], TRANSFER_CONCURRENCY, async ([name, f]) => {
      options.signal?.throwIfAborted();
      await this.objects.putFile(name, path.join(dir, f.name), f.bytes, { immutable: fromStore && IMMUTABLE_FILE.test(f.name) });
      options.onStored(f, name);
    });
    await this.objects.sync();
  }

  /** Forgets `m` (if it is still `source`'s) and lets `collect` remove its objects again. */
  #dropMaterialization(source: Store, m: Materialization): void {
    if (this.#materializations.get(source) === m) this.#materializations.delete(source);
    if (m.names) this.#keepUnnamed(m.key, m.names, -1);
    m.names = undefined;
  }

  /** Counts `names` of `key` in (`by` 1) or out of (-1) the objects `collect` keeps. */
  #keepUnnamed(key: string, names: readonly string[], by: 1 | -1): void {
    let kept = this.#unnamed.get(key);
    if (!kept) this.#unnamed.set(key, (kept = new Map()));
    for (const n of names) {
      const c = (kept.get(n) ?? 0) + by;
      if (c > 0) kept.set(n, c);
      else kept.delete(n);
    }
    if (kept.size === 0) this.#unnamed.delete(key);
  }

  /**
   * The logs' new bytes since `chain`'s last put and their SHA-256, read on a file thread (one
   * message, not a stat, an open, reads and a close per log through the libuv pool, plus a
   * digest); undefined when tail puts are off or the chain holds its most chunks.
   */
  #readWalTail(source: Store, chain: WalChain, options: CheckpointPutOptions): Promise<LogTailResult> | undefined {
    const limit = options.walTailBytes ?? defaultWalTailBytes(source);
    if (limit <= 0 || chain.chunks.length >= MAX_WAL_CHUNKS) return undefined;
    // A put that packs its chunks (no observer, no test hook) has them deflated on the file thread as they are read.
    const deflateFrom = this.hold || options.onProgress ? undefined : PACKED_DEFLATE_MIN_BYTES;
    return fileThreads().readLogTail(source.path, WAL_FILE, chain.wal, chain.walBytes, limit * WAL_TAIL_OVERSHOOT - chain.logged, this.#logLink(chain.key, source), deflateFrom);
  }

  /**
   * Where a tail put hard-links the store's logs ("Linked logs", docs/checkpoints.md): the
   * key's files folder of a store whose objects are local files; undefined for S3.
   */
  #logLink(key: string, source: Store): LogLink | undefined {
    if (!this.objects.localPath) return undefined;
    let id = this.#linkIds.get(source);
    if (id === undefined) this.#linkIds.set(source, (id = randomBytes(6).toString('hex')));
    return { dir: this.objects.localPath(filesPrefix(key)), prefix: logLinkPrefix(id) };
  }

  /**
   * A WAL tail put (docs/checkpoints.md, "WAL tail puts"): RocksDB writes every batch to its
   * live log before it returns, in commit order, and changes its logs only by appending, or
   * by switching to a new one (a memtable switch, before a flush). So the chain's log from the
   * size the chain holds, then every newer log whole, are the write batches made since the
   * chain's last put: they are stored as one chunk object per log, and the new manifest is the
   * last one with those logs one chunk longer (or new, of one chunk). Restored, RocksDB replays
   * every log from the chain's oldest on top of the chain's files: SST files flushed since
   * are not needed, the logs hold their writes (a log is deleted only once every column
   * family flushed past it, and then every older one is too: the chain's log still there
   * means every newer one is). Every write completed before this put began is below the sizes
   * read here; a batch being written meanwhile may end the newest chunk torn, which RocksDB's
   * recovery (point-in-time, the default) stops before, and the next chunk completes.
   * Compactions may run meanwhile: they change SST files, not what the logs replay onto.
   * @param tail what `#readWalTail` read (begun beside the manifests' listing)
   * @returns the put's report, or undefined when a whole put is needed (the chain's log was
   *   deleted, the chain reached `walTailBytes`)
   */
  async #putWalTail(key: string, source: Store, sequence: number, chain: WalChain, tail: LogTailResult, listing: Promise<Map<string, number>>, options: CheckpointPutOptions, t0: number, baseObjects?: Map<string, number>, arrival?: GroupArrival): Promise<CheckpointPutReport | undefined> {
    const { signal } = options;
    if (tail.status !== 'ok') return undefined; // the chain's log is gone (its writes are in SSTs only), or the chain is full
    const { reads, added } = tail;
    const checkpointSeconds = (performance.now() - t0) / 1000;
    const t1 = performance.now();
    const stored = await listing;
    signal?.throwIfAborted();
    if (baseObjects) {
      // A base's files: each stored by its materialization, or stored before and still (a
      // collect since may have removed what the materialization found stored).
      // (A base's files are whole files, never packed in a manifest: skipped all the same.)
      for (const f of chain.files) for (const o of objectsOfFile(key, f)) if (!o.startsWith(manifestsPrefix(key)) && !baseObjects.has(o) && !stored.has(o)) return undefined;
      for (const [name, bytes] of baseObjects) stored.set(name, bytes);
    }
    // The logs' new entries, and the objects to store (one chunk per log that grew). Without a
    // progress observer or the manifest-hold hook (which see each chunk stored first), the
    // chunks are packed into the manifest's own object: one request (docs/checkpoints.md,
    // "Packed chunks").
    const pack = !(this.hold || options.onProgress);
    const byName = new Map(chain.files.map((f) => [f.name, f]));
    const objects: Array<{ name: string; data: Buffer; label: string }> = [];
    const payload: Buffer[] = [];
    const deflatedParts: Array<Buffer | undefined> = [];
    let packedBytes = 0;
    let last: { name: string; bytes: number; chunks: CheckpointChunk[]; link?: string } = { name: chain.wal, bytes: chain.walBytes, chunks: chain.chunks, ...(chain.link ? { link: chain.link } : {}) };
    const linkId = this.#linkIds.get(source);
    for (const [i, r] of reads.entries()) {
      // A log whose chunks a manifest names in its link stays linked (its earlier chunks were
      // never stored apart): if it no longer can be, a whole put.
      if (i === 0 && chain.link && !r.linked) return undefined;
      let chunks = i === 0 ? chain.chunks : [];
      if (r.bytes > 0) {
        const { sha256 } = r;
        const name = fileObjectName(key, sha256);
        if (!r.linked && pack && stored.get(name) !== r.bytes) {
          chunks = [...chunks, { bytes: r.bytes, sha256, in: sequence, at: packedBytes }];
          payload.push(r.data);
          deflatedParts.push(r.deflated);
          packedBytes += r.bytes;
        } else {
          chunks = [...chunks, { bytes: r.bytes, sha256 }];
          if (!r.linked && stored.get(name) !== r.bytes && !objects.some((o) => o.name === name)) objects.push({ name, data: r.data, label: `${r.name}@${r.from}` });
        }
      }
      const bytes = r.from + r.bytes;
      const link = r.linked ? logLinkName(key, linkId!, r.name) : undefined;
      if (chunks.length > 0) byName.set(r.name, { name: r.name, bytes, sha256: chunkListSha256(chunks), chunks, ...(link ? { link } : {}) });
      last = { name: r.name, bytes, chunks, ...(link ? { link } : {}) };
    }
    const files = [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const bytes = files.reduce((s, f) => s + f.bytes, 0);
    const manifest: CheckpointManifest = { key, sequence, createdAt: new Date().toISOString(), files, bytes, metadata: options.metadata ?? new Uint8Array(0) };
    // The packed bytes deflated (level 1) when that saves at least a tenth: a log is mostly
    // keys and values written again and again. One log's bytes were deflated by the file
    // thread that read them; the bytes of several logs (a switch between two puts) are
    // deflated together on the libuv pool. Off the main thread either way.
    let storedPayload: Buffer[] | undefined = payload.length > 0 ? payload : undefined;
    let packing: { encoding: PackedEncoding; rawBytes: number } | undefined;
    if (storedPayload && packedBytes >= PACKED_DEFLATE_MIN_BYTES) {
      const deflated = payload.length === 1 && deflatedParts[0] ? deflatedParts[0] : await deflateRawAsync(Buffer.concat(storedPayload), { level: 1 });
      if (deflated.length <= packedBytes * 0.9) {
        storedPayload = [deflated];
        packing = { encoding: 'deflate-raw', rawBytes: packedBytes };
      }
    }
    const manifestObject = { name: manifestName(key, sequence), bytes: encodeManifest(manifest, storedPayload, packing) };
    let groupedManifests = 1;
    if ((this.hold || options.onProgress) && objects.length > 0) {
      // A progress observer (who may abort the put after a file) and the manifest-hold test
      // hook see each chunk stored before the manifest is written: two steps.
      for (const o of objects) {
        await this.objects.putBytes(o.name, o.data);
        options.onProgress?.({ kind: 'uploaded', file: o.label, bytes: o.data.length });
      }
      signal?.throwIfAborted();
      await this.#holdManifest(key, sequence, objects.length, signal);
      await this.objects.putBytes(manifestObject.name, manifestObject.bytes);
    } else if (options.groupCommit && options.fencedWriter && objects.length === 0 && splitKey(key)) {
      // Nothing but the manifest (its chunks packed in it): with the concurrent tail puts of
      // the parent's other keys, in one object (docs/checkpoints.md, "Group commits").
      const stored = await this.#groupCommit(key, sequence, this.#groupFloor(manifest, options.groupCommit.keep), manifestObject.bytes, arrival);
      this.#located(key, sequence, stored.name);
      groupedManifests = stored.manifests;
    } else {
      // The chunks, then the manifest once they are durable: one message to a file thread.
      await this.objects.putAllThen(objects.map((o) => ({ name: o.name, bytes: o.data })), manifestObject);
    }
    for (const o of objects) stored.set(o.name, o.data.length);
    this.#listings.set(key, { latest: sequence, files: stored });
    this.#ownManifest(manifest);
    chain.sequence = sequence;
    chain.files = files;
    chain.wal = last.name;
    chain.walBytes = last.bytes;
    chain.chunks = last.chunks;
    chain.link = last.link;
    chain.logged += added;
    this.#walChains.set(source, chain);
    const limit = options.walTailBytes ?? defaultWalTailBytes(source);
    if (!this.#materializations.has(source) && chain.logged >= (chain.rebaseAt ?? limit * REBASE_SHARE)) this.#startMaterialization(key, source, chain, options, limit);
    const uploadedBytes = objects.reduce((n, o) => n + o.data.length, 0) + (storedPayload?.reduce((n, b) => n + b.length, 0) ?? 0);
    return {
      manifest,
      files: files.length,
      bytes,
      uploadedFiles: objects.length + payload.length,
      uploadedBytes,
      checkpointSeconds,
      uploadSeconds: (performance.now() - t1) / 1000,
      walTail: true,
      groupedManifests,
    };
  }

  /**
   * Name, size and SHA-256 of every file of a checkpoint directory, by name.
   * @param immutable the immutable files of earlier local checkpoints of the same open store
   *   (`#immutableByStore`): used instead of a stat and a hash, and added to
   */
  async #describe(dir: string, immutable?: Map<string, CheckpointFile>): Promise<CheckpointFile[]> {
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new InvalidArgumentError(`checkpoint directory ${dir} does not exist`, { cause: err });
      throw err;
    }
    const names = entries.filter((e) => e.isFile()).map((e) => e.name).sort();
    if (names.length === 0) throw new InvalidArgumentError(`checkpoint directory ${dir} holds no file`);
    for (const name of names) {
      if (!isCheckpointFileName(name)) throw new InvalidArgumentError(`checkpoint directory ${dir}: file name ${JSON.stringify(name)} is not a RocksDB file name`);
    }
    const out: CheckpointFile[] = new Array(names.length);
    // Stats and hashes of several files at once: one at a time, a put of a store of 60 files
    // spent tens of ms waiting on the libuv pool for them under load.
    const seen = new Set<string>();
    await forEachLimit(names, DESCRIBE_CONCURRENCY, async (name, i) => {
      const known = immutable?.get(name);
      if (known) {
        out[i] = known;
        seen.add(name);
        return;
      }
      const p = path.join(dir, name);
      const st = await stat(p, { bigint: true });
      const cacheKey = IMMUTABLE_FILE.test(name) ? `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}` : undefined;
      let sha256 = cacheKey === undefined ? undefined : this.#hashes.get(cacheKey);
      if (sha256 === undefined) {
        // On a file thread: the new SST files of a flush are megabytes, whose hashing on the
        // main thread held up the pushes of the worker's other partitions.
        sha256 = await fileThreads().hash(p);
        if (cacheKey !== undefined) {
          if (this.#hashes.size >= HASH_CACHE_LIMIT) this.#hashes.clear();
          this.#hashes.set(cacheKey, sha256);
        }
      }
      out[i] = { name, bytes: Number(st.size), sha256 };
      if (immutable && IMMUTABLE_FILE.test(name)) {
        immutable.set(name, out[i]!);
        seen.add(name);
      }
    });
    // Files gone from the store (compacted away) are not asked for again.
    if (immutable) for (const name of immutable.keys()) if (!seen.has(name)) immutable.delete(name);
    return out;
  }

  async restore(key: string, dir: string, options: CheckpointRestoreOptions = {}): Promise<CheckpointRestoreReport> {
    checkKey(key);
    if (options.sequence !== undefined) checkSequence(options.sequence);
    const t0 = performance.now();
    const manifest = options.sequence === undefined ? await this.latest(key) : await this.#manifest(key, options.sequence);
    if (!manifest) {
      throw new CheckpointNotFoundError(
        options.sequence === undefined
          ? `no checkpoint of ${key} in ${this.url}`
          : `no checkpoint ${key}@${options.sequence} in ${this.url} (it has: ${(await this.list(key)).join(', ') || 'none'})`,
        key,
        options.sequence,
      );
    }
    const exists = await stat(dir).then(() => true, (err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? false : Promise.reject(err)));
    if (exists) throw new InvalidArgumentError(`restore of ${key}@${manifest.sequence}: ${dir} exists; restore into a new directory`);
    const tmp = `${dir}.restoring-${randomBytes(4).toString('hex')}`;
    await mkdirs(tmp);
    const cached = { files: 0, bytes: 0 };
    try {
      const payloads = new Map<number, Promise<Buffer | undefined>>();
      if (!options.cache) this.#prefetchPayloads(manifest, payloads);
      await forEachLimit(manifest.files, TRANSFER_CONCURRENCY, (f) => this.#fetch(manifest, f, path.join(tmp, f.name), payloads, options.cache, cached));
      await rename(tmp, dir);
    } catch (err) {
      await rm(tmp, { recursive: true, force: true });
      throw err;
    }
    return { manifest, directory: dir, bytes: manifest.bytes, seconds: (performance.now() - t0) / 1000, cachedFiles: cached.files, cachedBytes: cached.bytes };
  }

  async warm(key: string, cache: CheckpointFileCache): Promise<CheckpointWarmReport | undefined> {
    checkKey(key);
    const t0 = performance.now();
    const manifest = await this.latest(key);
    if (!manifest) return undefined;
    const payloads = new Map<number, Promise<Buffer | undefined>>();
    const contents = new Set<string>();
    let files = 0;
    let bytes = 0;
    let fetchedFiles = 0;
    let fetchedBytes = 0;
    // Whole files, and each chunk of a chunked file (not a linked log's).
    const wanted: Array<{ sha256: string; bytes: number; file?: CheckpointFile; of?: CheckpointFile; index?: number }> = [];
    for (const f of manifest.files) {
      if (f.link) continue;
      if (f.chunks) f.chunks.forEach((c, index) => wanted.push({ sha256: c.sha256, bytes: c.bytes, of: f, index }));
      else wanted.push({ sha256: f.sha256, bytes: f.bytes, file: f });
    }
    await forEachLimit(wanted, TRANSFER_CONCURRENCY, async (w) => {
      if (contents.has(w.sha256)) return;
      contents.add(w.sha256);
      files++;
      bytes += w.bytes;
      if ((await cache.bytesOf(w.sha256)) === w.bytes) return;
      if (w.file) {
        const tmp = cache.tempPath();
        await mkdirs(cache.dir);
        try {
          await this.#fetch(manifest, w.file, tmp, payloads);
          await cache.add(w.sha256, { from: tmp });
        } finally {
          await rm(tmp, { force: true });
        }
      } else {
        await cache.add(w.sha256, { bytes: await this.#chunkBytes(manifest, w.of!, w.index!, payloads) });
      }
      fetchedFiles++;
      fetchedBytes += w.bytes;
    });
    return { manifest, files, bytes, fetchedFiles, fetchedBytes, seconds: (performance.now() - t0) / 1000, contents };
  }

  /**
   * The bytes of chunk `index` of file `f` of `m` (packed in a manifest or stored apart),
   * checked against its size and SHA-256 as `#fetch` checks it.
   * @throws CheckpointDamagedError when it is missing or different
   */
  async #chunkBytes(m: CheckpointManifest, f: CheckpointFile, index: number, payloads: Map<number, Promise<Buffer | undefined>>): Promise<Buffer> {
    const part = f.chunks![index]!;
    const damaged = this.#damaged(m, f);
    const n = f.chunks!.length;
    if (part.in !== undefined) return this.#packedChunk(m, part, `chunk ${index + 1} of ${n} (packed in manifest ${part.in})`, payloads, damaged);
    const object = fileObjectName(m.key, part.sha256);
    const what = `chunk ${index + 1} of ${n} (object ${object})`;
    const data = await this.objects.getBytes(object);
    if (!data) throw damaged(`is missing ${what}`);
    if (data.length !== part.bytes) throw damaged(`${what} has ${data.length} bytes, the manifest says ${part.bytes}`);
    const sha = createHash('sha256').update(data).digest('hex');
    if (sha !== part.sha256) throw damaged(`${what} has SHA-256 ${sha}, the manifest says ${part.sha256}`);
    return data;
  }

  /**
   * The bytes of `part`, a chunk packed in a manifest's payload (this one's or an earlier
   * put's of the chain), checked against its SHA-256.
   * @param what the chunk as error messages name it
   * @throws CheckpointDamagedError (from `damaged`) when it is missing or different
   */
  async #packedChunk(m: CheckpointManifest, part: CheckpointChunk, what: string, payloads: Map<number, Promise<Buffer | undefined>>, damaged: (why: string) => CheckpointDamagedError): Promise<Buffer> {
    const payload = await this.#payload(m.key, part.in!, payloads);
    if (!payload) throw damaged(`is missing ${what}: no such manifest`);
    const at = part.at ?? 0;
    if (at + part.bytes > payload.length) throw damaged(`is missing ${what}: the payload holds ${payload.length} bytes, the chunk ends at ${at + part.bytes}`);
    const data = payload.subarray(at, at + part.bytes);
    const sha = createHash('sha256').update(data).digest('hex');
    if (sha !== part.sha256) throw damaged(`${what} has SHA-256 ${sha}, the manifest says ${part.sha256}`);
    return data;
  }

  /** The error of file `f` of `m` being damaged, saying `why` and what to do about it. */
  #damaged(m: CheckpointManifest, f: CheckpointFile): (why: string) => CheckpointDamagedError {
    return (why) =>
      new CheckpointDamagedError(`checkpoint ${m.key}@${m.sequence} in ${this.url} is damaged: ${f.name} ${why}; put the file back (from a copy) and start again: the checkpoint before it lacks what was acked since (docs/checkpoints.md, "What survives what", damaged latest checkpoint)`, m.key, m.sequence, f.name);
  }

  /**
   * The payload of packed chunks of the key's manifest of `sequence` (undefined when that
   * manifest is gone), fetched once per restore (`payloads`).
   */
  #payload(key: string, sequence: number, payloads: Map<number, Promise<Buffer | undefined>>): Promise<Buffer | undefined> {
    let p = payloads.get(sequence);
    if (!p) {
      p = this.#manifestBytes(key, sequence).then(async (bytes) => {
        if (bytes === undefined) return undefined;
        const { payload, encoding, rawBytes } = decodeManifestAndPayload(key, sequence, bytes);
        if (encoding === 'raw') return payload;
        let raw: Buffer;
        try {
          raw = await inflateRawAsync(payload);
        } catch (err) {
          throw new CheckpointDamagedError(`checkpoint ${key}@${sequence} in ${this.url} is damaged: its packed chunks do not inflate (${(err as Error).message})`, key, sequence);
        }
        if (raw.length !== rawBytes) throw new CheckpointDamagedError(`checkpoint ${key}@${sequence} in ${this.url} is damaged: its packed chunks inflate to ${raw.length} bytes, the manifest says ${rawBytes}`, key, sequence);
        return raw;
      });
      payloads.set(sequence, p);
    }
    return p;
  }

  /**
   * Starts fetching the payloads of every manifest whose packed chunks `m` reads
   * (`PAYLOAD_PREFETCH` at once), into `payloads`: a log's chunks are written in order, and a
   * chain of tail puts packs them in as many manifests (each one or two requests, from a group
   * object). Failures are left to the fetch that awaits them.
   */
  #prefetchPayloads(m: CheckpointManifest, payloads: Map<number, Promise<Buffer | undefined>>): void {
    const seqs = new Set<number>();
    for (const f of m.files) if (!f.link) for (const c of f.chunks ?? []) if (c.in !== undefined) seqs.add(c.in);
    void forEachLimit([...seqs], PAYLOAD_PREFETCH, (s) => this.#payload(m.key, s, payloads).then(() => undefined, () => undefined));
  }

  /**
   * Writes file `f` of `m` to `target`, counting and hashing what arrives; refuses a mismatch.
   * Content in `cache` is taken from it (a whole immutable file linked, a chunk read) and
   * counted in `cached`.
   * @param payloads the payloads of packed chunks fetched so far by this restore (`#payload`)
   */
  async #fetch(m: CheckpointManifest, f: CheckpointFile, target: string, payloads: Map<number, Promise<Buffer | undefined>>, cache?: CheckpointFileCache, cached?: { files: number; bytes: number }): Promise<void> {
    const damaged = this.#damaged(m, f);
    if (f.link && f.chunks) return this.#fetchLinked(f as CheckpointFile & { link: string; chunks: readonly CheckpointChunk[] }, target, damaged);
    // An immutable file is linked; another (a log, MANIFEST, OPTIONS, CURRENT) copied, since
    // the restored store may write to it.
    if (cache && cached && !f.chunks && (await cache.linkTo(f.sha256, f.bytes, target, { copy: !IMMUTABLE_FILE.test(f.name) }))) {
      cached.files++;
      cached.bytes += f.bytes;
      return;
    }
    const hash = createHash('sha256');
    let bytes = 0;
    const parts = f.chunks ?? [{ bytes: f.bytes, sha256: f.sha256 }];
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i]!;
      const fromCache = cache && cached && f.chunks ? await cache.read(part.sha256, part.bytes) : undefined;
      if (fromCache) {
        await writeFile(target, fromCache, { flag: i === 0 ? 'wx' : 'a' });
        bytes += fromCache.length;
        cached!.files++;
        cached!.bytes += fromCache.length;
        continue;
      }
      if (part.in !== undefined) {
        const data = await this.#packedChunk(m, part, `chunk ${i + 1} of ${parts.length} (packed in manifest ${part.in})`, payloads, damaged);
        await writeFile(target, data, { flag: i === 0 ? 'wx' : 'a' });
        bytes += data.length;
        continue;
      }
      const object = fileObjectName(m.key, part.sha256);
      const what = f.chunks ? `chunk ${i + 1} of ${parts.length} (object ${object})` : `(object ${object})`;
      const body = await this.objects.getStream(object);
      if (!body) throw damaged(`is missing ${what}`);
      const partHash = f.chunks ? createHash('sha256') : undefined;
      let partBytes = 0;
      const check = new Transform({
        transform(chunk: Buffer, _enc, done) {
          partBytes += chunk.length;
          if (partHash) partHash.update(chunk);
          else hash.update(chunk);
          done(null, chunk);
        },
      });
      await pipeline(body, check, createWriteStream(target, { flags: i === 0 ? 'wx' : 'a' }));
      bytes += partBytes;
      if (partHash) {
        if (partBytes !== part.bytes) throw damaged(`${what} has ${partBytes} bytes, the manifest says ${part.bytes}`);
        const sha = partHash.digest('hex');
        if (sha !== part.sha256) throw damaged(`${what} has SHA-256 ${sha}, the manifest says ${part.sha256}`);
      }
    }
    if (bytes !== f.bytes) throw damaged(`has ${bytes} bytes, the manifest says ${f.bytes}`);
    // A file in chunks: each chunk was checked against its digest, and the manifest's hash list
    // against the chunks when it was read (decodeManifest).
    const sha256 = f.chunks ? chunkListSha256(f.chunks) : hash.digest('hex');
    if (sha256 !== f.sha256) throw damaged(`has SHA-256 ${sha256}, the manifest says ${f.sha256}`);
  }

  /**
   * Writes the first `f.bytes` bytes of `f.link` (a linked log, which may have grown since) to
   * `target`, checking each chunk's bytes against its digest as they pass.
   */
  async #fetchLinked(f: CheckpointFile & { readonly link: string; readonly chunks: readonly CheckpointChunk[] }, target: string, damaged: (why: string) => CheckpointDamagedError): Promise<void> {
    const body = await this.objects.getStream(f.link);
    if (!body) throw damaged(`is missing its linked log (object ${f.link})`);
    const { chunks } = f;
    let i = 0;
    let inChunk = 0;
    let partHash = createHash('sha256');
    let written = 0;
    /** Ends chunk i when it is full (and every empty chunk after it), checking its digest. */
    const close = () => {
      while (i < chunks.length && inChunk === chunks[i]!.bytes) {
        const sha = partHash.digest('hex');
        if (sha !== chunks[i]!.sha256) throw damaged(`chunk ${i + 1} of ${chunks.length} (in ${f.link}) has SHA-256 ${sha}, the manifest says ${chunks[i]!.sha256}`);
        i++;
        inChunk = 0;
        partHash = createHash('sha256');
      }
    };
    const cut = new Transform({
      transform(piece: Buffer, _enc, done) {
        try {
          close();
          let at = 0;
          while (at < piece.length && i < chunks.length) {
            const n = Math.min(piece.length - at, chunks[i]!.bytes - inChunk);
            partHash.update(piece.subarray(at, at + n));
            inChunk += n;
            at += n;
            close();
          }
          const keep = piece.subarray(0, at);
          written += keep.length;
          done(null, keep);
        } catch (err) {
          done(err as Error);
        }
      },
    });
    await pipeline(body, cut, createWriteStream(target, { flags: 'wx' }));
    close();
    if (i < chunks.length || written !== f.bytes) throw damaged(`has ${written} bytes in its linked log ${f.link}, the manifest says ${f.bytes}`);
  }

  async collect(key: string, keep: number, options: CheckpointCollectOptions = {}): Promise<CheckpointCollectReport> {
    checkKey(key);
    if (!Number.isSafeInteger(keep) || keep < 1) throw new InvalidArgumentError(`collect keeps at least 1 checkpoint, got keep = ${String(keep)}`);
    const { signal, fence } = options;
    signal?.throwIfAborted();
    return this.#lock(key).runExclusive(async () => {
      signal?.throwIfAborted();
      const split = splitKey(key);
      const groups = split ? await this.#listGroups(split.parent) : [];
      const located = await this.#locate(key, groups);
      const seqs = [...located.keys()].sort((a, b) => b - a);
      const kept = seqs.slice(0, keep);
      // The key's latest manifest is this process's own when its listing says so (the put
      // trusts that listing too; another writer's put since, or a remove, makes it stale).
      const known = this.#listings.get(key);
      const current = known !== undefined && known.latest === seqs[0];
      // Every kept manifest is read before anything is removed: one that does not parse stops
      // it. While current, the kept manifests this process put are known (never rewritten).
      const own = current ? this.#ownManifests.get(key) : undefined;
      const used = new Set<string>();
      for (const m of await Promise.all(kept.map((s) => own?.get(s) ?? this.#manifest(key, s)))) {
        for (const f of m?.files ?? []) for (const o of objectsOfFile(key, f)) used.add(o);
      }
      // A manifest holding a packed chunk of a kept one stays (as that chunk's object).
      const removed = seqs.slice(keep).filter((s) => !used.has(manifestName(key, s)));
      // What is left is the key's floor here from now on: its entries in group objects below it
      // are collected (listed no more), and a group object all of whose entries are collected
      // is removed, whoever's keys they are (docs/checkpoints.md, "Group commits").
      const left = seqs.filter((s) => !removed.includes(s));
      if (left.length > 0) this.#floors.set(key, Math.max(this.#floors.get(key) ?? 0, Math.min(...left)));
      const floors = split ? this.#groupFloors(split.parent, groups) : new Map<string, number>();
      const deadGroups = groups.filter((g) => !this.#deletingGroups.has(g.name) && g.entries.every((e) => e.sequence < (floors.get(e.leaf) ?? 0))).map((g) => g.name);
      if (!current) this.#ownManifests.delete(key); // another writer's now: none of this process's is needed
      else if (own) for (const s of own.keys()) if (!kept.includes(s)) own.delete(s);
      // The stored files: in a store of remote objects (S3), this process's listing when the
      // key's latest manifest is its own (the put trusts it so too), but every
      // COLLECT_LISTS_EVERY-th collect of the key, which lists, so that objects no put of this
      // process stored (a fenced owner's uploads after its lease ran out) are removed too. A
      // collect on S3 took 127 ms, median, 648 ms p90, on cnr-2000 during a rank. A directory
      // store always lists (a readdir on a file thread): its tail puts hard-link logs into the
      // key's folder, which this listing does not hold.
      this.#listings.delete(key);
      const count = (this.#collects.get(key) ?? 0) + 1;
      this.#collects.set(key, count);
      const trusted = current && !this.objects.localPath && count % COLLECT_LISTS_EVERY !== 0;
      const attempted = new Set<string>();
      /** Deletes `names` in slices, the signal checked before each: an abort leaves no delete in flight. */
      const remove = async (names: string[]) => {
        for (let i = 0; i < names.length; i += COLLECT_DELETE_SLICE) {
          signal?.throwIfAborted();
          fence?.();
          const slice = names.slice(i, i + COLLECT_DELETE_SLICE);
          for (const n of slice) attempted.add(n);
          await this.objects.delete(slice);
        }
      };
      try {
        // Oldest first, so that an interrupted collect leaves the newest checkpoints whole.
        await remove(removed.filter((s) => located.get(s) === manifestName(key, s)).reverse().map((s) => manifestName(key, s)));
        for (const name of deadGroups) this.#deletingGroups.add(name);
        try {
          await remove(deadGroups);
        } finally {
          for (const name of deadGroups) {
            this.#deletingGroups.delete(name);
            this.#groupHeaders.delete(name);
          }
        }
        const listed = trusted
          ? [...known.files].map(([name, bytes]) => ({ name, bytes }))
          : await this.objects.list(filesPrefix(key));
        // Not the files of a base made in the background either (#materialize): no manifest names them yet.
        const unnamed = this.#unnamed.get(key);
        const unused = listed.filter((o) => !used.has(o.name) && !unnamed?.has(o.name));
        await remove(unused.map((o) => o.name));
        // What is stored now: the listing less what was removed (the latest manifest is as before).
        if (current) this.#listings.set(key, { latest: known.latest, files: new Map(listed.filter((o) => used.has(o.name)).map((o) => [o.name, o.bytes])) });
        return {
          kept,
          removed,
          removedFiles: unused.length,
          removedBytes: unused.reduce((s, o) => s + o.bytes, 0),
        };
      } catch (err) {
        // Stopped part way (aborted, or a delete failed): the listing stays known less every
        // object a delete was sent for, so that no put counts on one that may be gone.
        if (current) this.#listings.set(key, { latest: known.latest, files: new Map([...known.files].filter(([name]) => !attempted.has(name))) });
        throw err;
      }
    });
  }

  async remove(key: string): Promise<number> {
    checkKey(key);
    return this.#lock(key).runExclusive(async () => {
      this.#listings.delete(key);
      this.#ownManifests.delete(key);
      this.#collects.delete(key);
      const split = splitKey(key);
      const groups = split ? await this.#listGroups(split.parent) : [];
      const located = await this.#locate(key, groups);
      const seqs = [...located.keys()].sort((a, b) => a - b);
      // Newest first: a reader meanwhile still sees an older checkpoint whole, never a newer one.
      for (const s of seqs.slice().reverse()) if (located.get(s) === manifestName(key, s)) await this.objects.delete([manifestName(key, s)]);
      if (split) await this.#dropFromGroups(split.parent, split.leaf, groups);
      await this.objects.delete((await this.objects.list(filesPrefix(key))).map((o) => o.name));
      this.#locations.delete(key);
      return seqs.length;
    });
  }

  /**
   * Takes the entries of `leaf` out of the group objects of `parent` (`remove`): each group
   * object holding one is stored again with the other keys' live entries (as a group object,
   * or as the key's own manifest object when one is left), then deleted.
   */
  async #dropFromGroups(parent: string, leaf: string, groups: readonly ListedGroup[]): Promise<void> {
    const floors = this.#groupFloors(parent, groups);
    for (const g of groups) {
      if (!g.entries.some((e) => e.leaf === leaf)) continue;
      const others = g.entries.filter((e) => e.leaf !== leaf && e.sequence >= (floors.get(e.leaf) ?? 0));
      const bytes: Buffer[] = [];
      for (const e of others) {
        const b = await this.#groupEntry(g.name, `${parent}/${e.leaf}`, e.sequence);
        if (b === undefined) break; // gone meanwhile (another process's collect or remove)
        bytes.push(b);
      }
      if (bytes.length < others.length) continue;
      if (others.length === 1) await this.objects.putBytes(manifestName(`${parent}/${others[0]!.leaf}`, others[0]!.sequence), bytes[0]!);
      else if (others.length > 1) await this.objects.putBytes(groupName(parent, others), encodeGroup(others, bytes));
      await this.objects.delete([g.name]);
      this.#groupHeaders.delete(g.name);
    }
  }

  async close(): Promise<void> {
    await this.settled();
    return this.objects.close();
  }
}
