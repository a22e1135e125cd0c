import { existsSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { Packr } from 'msgpackr';
import type { BrokerIdentity } from '../runtime/brokers/index.js';
import { Store } from '../storage/index.js';
import { DataDirError, decodeInt64, isShardflowError } from '../index.js';
import { ColumnFamilies, Counters, partitionColumnFamilies } from '../actors/partition/schema.js';
import { acquireDataDirLock, type DataDirLock } from './dataDirLock.js';
import { URL_KEY_FORM } from '../actors/crawler/canonicalUrl.js';
import { mkdirsSync } from '../storage/index.js';

/** Name of the data dir's record file (JSON), next to the partition folders `p<i>`. */
export const RECORD_FILE = 'shardflow.json';
/** `meta` key of a partition store's shape: msgpack `PartitionShape`. */
export const SHAPE_KEY = 'shape';
/** `meta` key of the highest round a partition pushed (written by the metric actor). */
const LAST_ROUND_KEY = 'last-round';

const packr = new Packr({ useRecords: false });

/** Where a data dir's messages live on the broker (moved to src/runtime/brokers/identity.ts). */
export type { BrokerIdentity };

/** What a data dir holds: the job that wrote it and its input. */
export interface JobInput {
  /** `graph` (`shardflow rank`: a graph file) or `crawl` (`demo`, `crawl`: seeds). */
  readonly kind: 'graph' | 'crawl';
  /** Human-readable: the files or seeds. */
  readonly description: string;
  /** A digest of the input (sha256 of the graph files), to tell another input from the same. */
  readonly digest?: string;
  /**
   * The link weights the data dir's metric state was computed with (`weightsLabel`: `uniform`,
   * `reasonable`, `table:<digest>`): its ranks and residuals hold for those weights only, so a
   * run with others is refused. Absent in records written before it was kept.
   */
  readonly weights?: string;
}

/** The shape of a partition store, in its `meta` (SHAPE_KEY). */
export interface PartitionShape {
  readonly partition: number;
  readonly partitions: number;
  /** `Partitioner.describe()`, e.g. `fnv1a-host/16`. */
  readonly partitioner: string;
  /** The id of the data dir the store was created in (`DataDirRecord.id`; absent in stores written before ids). */
  readonly dataDir?: string;
}

/**
 * The record file of a data dir (`shardflow.json`). `state` is `running` from the start of
 * a run until a stop that found nothing in flight (`quiet`): a run that is killed, or
 * stopped while messages were in flight, leaves `running`, and the next run repairs what
 * those messages carried (see docs/ARCHITECTURE.md, "Crash and restart").
 */
export interface DataDirRecord {
  readonly format: 1;
  /**
   * A random id (UUID) given when the data dir is created and written into each partition
   * store's shape, so that a store copied in from another data dir of the same shape is
   * refused (absent in data dirs created before ids).
   */
  readonly id?: string;
  /**
   * The form of the page keys (`URL_KEY_FORM` of `canonicalUrl`) the data dir was created
   * with; absent in data dirs created before it was recorded. An existing data dir that may
   * hold crawled pages keyed by another form is refused (`DataDir.open`).
   */
  readonly urlKey?: string;
  readonly partitions: number;
  readonly partitioner: string;
  readonly broker: BrokerIdentity;
  readonly input?: JobInput;
  /**
   * False from the start of a run whose input differs from the recorded one (another digest,
   * or the first) until a run completes with it (`markInputApplied`): a run stopped or killed
   * before that leaves the input partly applied, and a run with other input is refused
   * until the same input is run again (`inputPending`). Absent in records written before it:
   * taken as applied.
   */
  readonly inputApplied?: boolean;
  readonly state: 'running' | 'quiet';
  /** True from the start of a repair until it completed; a run killed during one repairs again. */
  readonly repairing: boolean;
  /**
   * The last run saw the broker lose its scope's data (BrokerDataLostError): what it left
   * there cannot all come back, so the next run repairs instead of resuming, even where the
   * subscriptions were created again since.
   */
  readonly brokerLost?: boolean;
  /** Runs started on this data dir. */
  readonly runs: number;
  /** ISO time of the last change. */
  readonly updatedAt: string;
}

/** What the stores of an existing data dir hold, summed over its partitions. */
export interface DataDirSummary {
  readonly pages: number;
  readonly outlinks: number;
  readonly backlinks: number;
  /** The highest metric round any partition pushed (0: none). */
  readonly lastRound: number;
}

/** Options of `DataDir.open`. */
export interface DataDirOpenOptions {
  readonly partitions: number;
  /** `Partitioner.describe()` of the run. */
  readonly partitioner: string;
}

/**
 * A data dir: one RocksDB store per partition (`p<i>`) and a record file. `open` checks its
 * shape before anything runs on it: the partition count and scheme it was written with
 * (recorded in the file and in each store's `meta`), that every partition store is there
 * and opens, and it sums what the stores hold (the first line a job prints on it).
 */
export class DataDir {
  #record: DataDirRecord | undefined;
  #lock: DataDirLock | undefined;

  private constructor(
    readonly path: string,
    readonly options: DataDirOpenOptions,
    record: DataDirRecord | undefined,
    /** Undefined for a new data dir. */
    readonly summary: DataDirSummary | undefined,
  ) {
    this.#record = record;
  }

  /** Releases the data dir's lock (taken by `open`) at the end of the run. Idempotent. */
  release(): void {
    this.#lock?.release();
  }

  /**
   * Opens (or creates) the data dir at `path` for a run with `options`' shape.
   * Takes the data dir's lock (`acquireDataDirLock`) until `release()`.
   * @throws DataDirError when another live process holds the data dir, when it holds
   *   another partition count or scheme, when a partition store is missing or does not
   *   open (its name and path in the message), when its record file does not parse, or when it holds
   *   pages keyed by another URL form (`checkUrlKey`).
   *   Nothing is written then.
   */
  static async open(path: string, options: DataDirOpenOptions): Promise<DataDir> {
    const lock = acquireDataDirLock(path);
    try {
      const dir = await DataDir.#open(path, options);
      dir.#lock = lock;
      return dir;
    } catch (err) {
      lock.release();
      throw err;
    }
  }

  static async #open(path: string, options: DataDirOpenOptions): Promise<DataDir> {
    const record = readRecord(path);
    const folders = partitionFolders(path);
    // A data dir on which no run ever started holds nothing (a job records its run before it
    // writes): made anew, with this run's shape. So is one whose making a kill cut short: the
    // record is written first, so a kill while the stores are created leaves `runs: 0` with
    // some stores missing or half made, not stores without a record (which read as a data dir
    // of another partition count, or one written before records).
    if ((!record && folders.length === 0) || record?.runs === 0) {
      mkdirsSync(path);
      for (const p of folders) rmSync(join(path, `p${p}`), { recursive: true, force: true });
      const id = record?.id ?? randomUUID();
      const dir = new DataDir(path, options, undefined, undefined);
      // Empty stores are quiet: a run that fails before it starts (broker not answering)
      // leaves a data dir that the next run takes as new, not as one to repair.
      dir.#write({ format: 1, id, urlKey: URL_KEY_FORM, partitions: options.partitions, partitioner: options.partitioner, broker: { kind: 'none' }, state: 'quiet', repairing: false, runs: 0, updatedAt: new Date().toISOString() });
      await forEachStore(path, options, id, true, async () => undefined);
      return dir;
    }
    const partitions = record?.partitions ?? folders.length;
    const partitioner = record?.partitioner ?? `fnv1a-host/${partitions}`;
    if (partitions !== options.partitions || partitioner !== options.partitioner) {
      throw new DataDirError(
        `data dir ${path} holds ${partitions} partitions (${partitioner}); this run asks for ${options.partitions} (${options.partitioner}). ` +
          `Run with --partitions ${partitions} to go on with it, or give a fresh --data-dir (re-partitioning a data dir is not supported).`,
      );
    }
    for (let p = 0; p < partitions; p++) {
      if (!existsSync(join(path, `p${p}`))) {
        throw new DataDirError(`partition store p${p} (${join(path, `p${p}`)}) is missing from data dir ${path}, which holds ${partitions} partitions: restore it, or give a fresh --data-dir.`);
      }
    }
    let pages = 0;
    let outlinks = 0;
    let backlinks = 0;
    let lastRound = 0;
    await forEachStore(path, options, record?.id, false, async (store) => {
      const counter = async (name: string) => {
        const v = await store.get(ColumnFamilies.counters, name);
        return v ? Number(decodeInt64(v)) : 0;
      };
      pages += await counter(Counters.pages);
      outlinks += await counter(Counters.outlinks);
      backlinks += await counter(Counters.backlinks);
      const last = await store.get(ColumnFamilies.meta, LAST_ROUND_KEY);
      if (last) lastRound = Math.max(lastRound, Number(decodeInt64(last)));
    });
    if (pages + outlinks + backlinks > 0) checkUrlKey(path, record);
    return new DataDir(path, options, record, { pages, outlinks, backlinks, lastRound });
  }

  /** The record file's content (undefined for a new data dir, or one written before records). */
  get record(): DataDirRecord | undefined {
    return this.#record;
  }

  /** True when the data dir held partition stores before this run. */
  get existing(): boolean {
    return this.summary !== undefined;
  }

  /**
   * True when the last run on it did not stop quiet (killed, or stopped with messages in
   * flight), or was killed while repairing, or the data dir was written before records: what
   * was in flight must be recovered, by resuming on the same durable broker scope
   * (`resumableScope`) or by a repair from the stores.
   */
  get needsRecovery(): boolean {
    if (!this.existing) return false;
    return !this.#record || this.#record.state !== 'quiet' || this.#record.repairing;
  }

  /**
   * The recorded broker identity when it is on the same broker as `fresh` (same kind and
   * address) and has a scope; undefined otherwise.
   */
  recordedScope(fresh: BrokerIdentity): BrokerIdentity | undefined {
    const recorded = this.#record?.broker;
    return recorded?.scope && recorded.kind === fresh.kind && recorded.url === fresh.url ? recorded : undefined;
  }

  /**
   * The broker scope a run that needs no recovery uses: the recorded one on the same broker
   * (nothing of it is in flight, so it is reused as it is), else `fresh`.
   */
  brokerIdentity(fresh: BrokerIdentity): BrokerIdentity {
    return (!this.needsRecovery && this.recordedScope(fresh)) || fresh;
  }

  /**
   * A scope a recovering run may resume on: recorded, on the same durable broker, and not
   * left by a repair (a repair starts again from the stores).
   */
  resumableScope(fresh: BrokerIdentity): BrokerIdentity | undefined {
    return this.needsRecovery && !this.#record?.repairing && !this.#record?.brokerLost ? this.recordedScope(fresh) : undefined;
  }

  /**
   * The first line a job prints: new, or what the data dir holds and how the last run ended.
   * @param options.recovering false: say how the last run ended, not what this run does about
   *   it (`serve`, which recovers nothing; found by a new user: it said "recovering")
   */
  describe(options: { readonly recovering?: boolean } = {}): string {
    if (!this.summary) return `data dir ${this.path}: new, ${this.options.partitions} partitions (${this.options.partitioner})`;
    const s = this.summary;
    const acting = options.recovering !== false;
    const how = !this.#record
      ? `written before data dir records${acting ? ': recovering it' : ''}`
      : this.#record.repairing
        ? `the last run was stopped during a repair${acting ? ': repairing again' : ''}`
        : this.#record.state === 'running'
          ? `the last run did not stop quiet (killed or interrupted)${acting ? ': recovering what was in flight' : ''}`
          : 'the last run stopped quiet';
    const input = this.#record?.input ? `, holds ${this.#record.input.kind} ${this.#record.input.description}` : '';
    return `data dir ${this.path}: existing, ${this.options.partitions} partitions${input}: ${s.pages} pages, ${s.outlinks} links, ${s.backlinks} backlinks, last round ${s.lastRound}; ${how}`;
  }

  /**
   * Records the start of a run: state `running` (until `markStopped(true)`), the broker
   * identity it uses, its input, and `repairing` when it repairs.
   */
  markRunning(broker: BrokerIdentity, input: JobInput | undefined, repairing: boolean): void {
    const held = this.#record?.input;
    const same = input === undefined || (held !== undefined && held.kind === input.kind && held.digest === input.digest);
    const applied = same ? this.#record?.inputApplied : false;
    this.#write({
      format: 1,
      ...(this.#record?.id ? { id: this.#record.id } : {}),
      ...(this.#record?.urlKey ? { urlKey: this.#record.urlKey } : {}),
      partitions: this.options.partitions,
      partitioner: this.options.partitioner,
      broker,
      ...(input ?? this.#record?.input ? { input: (input ?? this.#record?.input)! } : {}),
      ...(applied !== undefined ? { inputApplied: applied } : {}),
      state: 'running',
      repairing,
      runs: (this.#record?.runs ?? 0) + 1,
      updatedAt: new Date().toISOString(),
    });
  }

  /** Records that a run completed with the recorded input (see `DataDirRecord.inputApplied`). */
  markInputApplied(): void {
    if (this.#record && this.#record.inputApplied !== true) this.#write({ ...this.#record, inputApplied: true, updatedAt: new Date().toISOString() });
  }

  /**
   * The recorded input when a run with it was stopped or killed before it completed (so it
   * is partly applied), else undefined.
   */
  get inputPending(): JobInput | undefined {
    return this.#record?.inputApplied === false ? this.#record.input : undefined;
  }

  /** Records that the repair completed. */
  markRepaired(): void {
    if (this.#record) this.#write({ ...this.#record, repairing: false, updatedAt: new Date().toISOString() });
  }

  /**
   * Records a stop; `quiet` only when nothing was in flight and everything folded was
   * committed; `brokerLost` when the run saw the broker lose its data (the next run repairs).
   */
  markStopped(quiet: boolean, brokerLost = false): void {
    if (!this.#record) return;
    const lost = brokerLost || this.#record.brokerLost === true;
    this.#write({ ...this.#record, state: quiet && !this.#record.repairing && !lost ? 'quiet' : 'running', ...(lost ? { brokerLost: true } : {}), updatedAt: new Date().toISOString() });
  }

  #write(record: DataDirRecord): void {
    const file = join(this.path, RECORD_FILE);
    const tmp = `${file}.tmp`;
    writeFileSync(tmp, `${JSON.stringify(record, null, 2)}\n`);
    renameSync(tmp, file); // atomic: a kill leaves the old record or the new one
    this.#record = record;
  }
}

/**
 * Refuses a data dir whose page keys may be of another form than `canonicalUrl`'s: one
 * created before `URL_KEY_FORM` was recorded, unless it holds a graph file (whose URLs are
 * stored as written, not canonicalised), or one that records another form. Reading it would
 * split a page in two (`/%7Ea` stored, `/~a` looked up and linked). No migration: re-crawl
 * into a fresh data dir.
 * @throws DataDirError naming the data dir, the form it holds and the form needed
 */
function checkUrlKey(path: string, record: DataDirRecord | undefined): void {
  if (record?.urlKey === URL_KEY_FORM) return;
  if (record?.urlKey === undefined && record?.input?.kind === 'graph') return;
  throw new DataDirError(
    `data dir ${path} holds pages keyed by ${record?.urlKey ? `URL form ${record.urlKey}` : 'the URL form used before RFC 3986 section 6.2.2 percent-encoding normalisation'}; ` +
      `this version keys pages by ${URL_KEY_FORM} (docs/crawling.md, "The URL key"), and reading it would split pages such as /~a and /%7Ea in two. ` +
      'Crawl again into a fresh --data-dir (there is no in-place migration).',
  );
}

/**
 * Reads a data dir's record file. @returns undefined when there is none
 * @throws DataDirError when it does not parse
 */
export function readRecord(path: string): DataDirRecord | undefined {
  const file = join(path, RECORD_FILE);
  if (!existsSync(file)) return undefined;
  try {
    const record = JSON.parse(readFileSync(file, 'utf8')) as DataDirRecord;
    if (record.format !== 1 || !Number.isInteger(record.partitions) || typeof record.partitioner !== 'string') throw new Error('unknown format');
    return record;
  } catch (err) {
    throw new DataDirError(`data dir record ${file} is damaged (${(err as Error).message}): restore it, or give a fresh --data-dir`, { cause: err });
  }
}

/** The partition folders (`p<i>`) in `path`, sorted by i. */
function partitionFolders(path: string): number[] {
  if (!existsSync(path)) return [];
  return readdirSync(path, { withFileTypes: true })
    .filter((e) => e.isDirectory() && /^p\d+$/.test(e.name))
    .map((e) => Number(e.name.slice(1)))
    .sort((a, b) => a - b);
}

/**
 * Checks the shape recorded in a partition store's `meta` (SHAPE_KEY) against `expected`
 * (partition, partition count, partitioner), or records `expected` in a store that has none.
 * @param dir the store's folder, for the message
 * @returns the id of the data dir the store was created in, as recorded (undefined when none was)
 * @throws DataDirError when the store was written as another partition, count or partitioner;
 *   the store's errors
 */
export async function checkPartitionShape(store: Store, dir: string, expected: PartitionShape): Promise<string | undefined> {
  const stored = await store.get(ColumnFamilies.meta, SHAPE_KEY);
  if (!stored) {
    await store.put(ColumnFamilies.meta, SHAPE_KEY, packr.pack(expected satisfies PartitionShape));
    return undefined;
  }
  const shape = packr.unpack(stored) as PartitionShape;
  if (shape.partition !== expected.partition || shape.partitions !== expected.partitions || shape.partitioner !== expected.partitioner) {
    throw new DataDirError(
      `partition store p${expected.partition} (${dir}) was written as partition ${shape.partition} of ${shape.partitions} (${shape.partitioner}), not as partition ${expected.partition} of ${expected.partitions} (${expected.partitioner}): the data dir holds the stores of another run (an earlier cluster of this name, with other partitions: give its workers new data dirs), or was assembled from other data dirs, or re-partitioned by hand`,
    );
  }
  return shape.dataDir;
}

/**
 * Opens each partition store in turn (one at a time: RocksDB allows one instance of a
 * directory per process), checks or writes its shape in `meta`, calls `visit`, closes it.
 * `id` is the data dir's (its record's); without one (a record lost, or written before
 * ids), every store that names a data dir must name the same one.
 * @throws DataDirError naming the store when it does not open, has another shape, or was
 *   created in another data dir
 */
async function forEachStore(path: string, options: DataDirOpenOptions, id: string | undefined, create: boolean, visit: (store: Store) => Promise<void>): Promise<void> {
  let owner = id;
  for (let p = 0; p < options.partitions; p++) {
    const dir = join(path, `p${p}`);
    let store: Store;
    try {
      store = await Store.open({ path: dir, columnFamilies: partitionColumnFamilies(), createIfMissing: create });
    } catch (err) {
      const why = isShardflowError(err) ? `${err.code}: ${err.message}` : (err as Error).message;
      throw new DataDirError(`partition store p${p} (${dir}) does not open: ${why}. Restore it, or give a fresh --data-dir.`, { cause: err });
    }
    try {
      const expected: PartitionShape = { partition: p, partitions: options.partitions, partitioner: options.partitioner, ...(id ? { dataDir: id } : {}) };
      const storedDataDir = await checkPartitionShape(store, dir, expected);
      if (storedDataDir !== undefined) {
        if (owner !== undefined && storedDataDir !== owner) {
          throw new DataDirError(
            `partition store p${p} (${dir}) was created in another data dir (id ${storedDataDir}, not ${owner}): the data dir was assembled from other data dirs. ` +
              'Its metric state belongs to another run, so it cannot go on with the others: restore this data dir\'s own p' + p + ', or give a fresh --data-dir.',
          );
        }
        owner = storedDataDir;
      }
      await visit(store);
    } finally {
      await store.close();
    }
  }
}
