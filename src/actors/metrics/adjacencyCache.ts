import { randomUUID } from 'node:crypto';
import type { Partitioner } from '../partition/hostPartitioner.js';
import { grown } from './grown.js';
import { KeyArena } from './keyArena.js';

/** The outlinks of one page, normalised: `weights` sum to 1 (or the page is dangling). */
export interface Adjacency {
  /** Target ids (see `AdjacencyCache.idOf` and `key`). */
  readonly targets: Int32Array;
  /** w_pq / sum_q w_pq, in the order of `targets`. */
  readonly weights: Float64Array;
  /**
   * True for a redirect (one outlink, a `Location`: partition/redirects.ts): the page
   * passes r w_pq on, not d r w_pq.
   */
  readonly undamped: boolean;
  /**
   * Per target, in the order of `targets`: its page's slot when the target is on the cache's
   * own partition, else -1 (`AdjacencyCache.localSlots`); set by the first push of the page,
   * so that a push adds a local share with array reads instead of lookups per link.
   */
  local?: Int32Array;
}

const EMPTY: Adjacency = Object.freeze({ targets: new Int32Array(0), weights: new Float64Array(0), undamped: false, local: new Int32Array(0) });

/**
 * A read cache of one partition's `outlinks` column family, in compact form (about 12
 * bytes a link plus one dictionary entry per distinct target URL), so that metric rounds do
 * not decode every link key and value from RocksDB again. The first push fills it from the
 * synchronized traversal of `ranks` and `outlinks`; afterwards every writer of `outlinks`
 * must call `invalidate(url)` under the partition's graph lock (the indexer does), and the
 * next push re-reads that page from the store. The cache lives as long as the partition's
 * environment, so it survives actor restarts, and it is never ahead of the store: an
 * invalidated page is read back from what was committed.
 *
 * Pages live in slots (dense integers, one per page ever cached, with the page's key
 * bytes in the KeyArena `slotKeys`); `order` lists the slots in `ranks` key order as the
 * last push saw it, so that a push finds a page's outlinks by position, comparing key
 * bytes, without decoding the URL or hashing it (`compareSlotKey`). Target ids are dense integers too, each with its key and
 * owning partition, so contributions are summed in a typed array (the combiner) instead of
 * a map of strings.
 */
export class AdjacencyCache {
  readonly #slotOf = new Map<string, number>();
  /** Per slot: the page's outlinks, or undefined when invalidated (or never read). */
  readonly #slots: Array<Adjacency | undefined> = [];
  /** Key bytes of each slot's page (slot = index). */
  readonly slotKeys = new KeyArena();
  readonly #ids = new Map<string, number>();
  /** Key bytes of each target id (id = index). */
  readonly targetKeys = new KeyArena();
  #partitionOf = new Int32Array(1024);
  /** Per target id: its index among the targets of its partition (dense per partition). */
  #indexInPartition = new Int32Array(1024);
  readonly #targetsPerPartition: number[] = [];
  /** Per target id of this partition: its page's slot + 1 (0: not looked up yet; see `localSlot`). */
  #localSlot = new Int32Array(1024);
  /**
   * Names this cache's target-index space in the contributions it sends: (dictionary,
   * index) always means the same target URL, so a receiver may remember the slot it found
   * for it (`remoteSlots`). New for every cache, so a restarted partition starts a new space.
   */
  readonly dictionary: string = randomUUID();
  /** Receiver side: per sender dictionary, index -> own slot + 1 (0: not looked up yet). */
  readonly #remote = new Map<string, Int32Array<ArrayBuffer>>();
  /** Slots in `ranks` key order, as the last push saw them (see `compareSlotKey`). */
  order: Int32Array = new Int32Array(0);
  /**
   * Bumped by every writer of `ranks` other than the metric actor (the indexer's teleport
   * and removals, the garbage collector), under the graph lock: a metric actor's in-memory
   * copy of the ranks (RankMirror) is only used while this has not moved.
   */
  ranksEpoch = 0;
  /** Open-addressing table from FNV-1a of a page key's bytes to its slot (-1: empty). */
  #table = new Int32Array(1024).fill(-1);
  /** True once a full traversal has filled the cache. */
  complete = false;
  /**
   * Per slot: the x of the page whose copy its backlinks were last sent (NaN: none sent by
   * this cache, or its outlinks changed since), for the metric actor's copies
   * (backlinks/backlinkValue.ts). New with the cache, so a process starts by sending every
   * page's copy once: copies lost with an earlier process's outbox or broker come back.
   */
  #copySent = new Float64Array(1024).fill(NaN);
  /**
   * Slots whose sent copy was forgotten by `invalidate` since `takeCopyOwed` was last called:
   * a push that checks only the pages it changed checks these too (their copy is due).
   */
  #copyOwed: number[] = [];
  /** Slots whose cached adjacency is `undamped` (redirects: see `undampedSlots`). */
  readonly #undamped = new Set<number>();
  /**
   * Pages whose outlinks changed (or may hold a redirect) and were not read back since (see
   * `unresolvedUrls`). URLs, not slots: a slot is given to a page on first sight, and slots
   * given in `ranks` key order by the first traversal keep pushes in that order.
   */
  readonly #unresolved = new Set<string>();

  constructor(readonly partitioner: Partitioner) {}

  /**
   * Caches `url`'s outlinks from their target URLs and raw weights; `undamped` for a
   * redirect (see `Adjacency.undamped`).
   * @returns the normalised adjacency
   */
  set(url: string, targets: readonly string[], rawWeights: readonly number[], undamped = false): Adjacency {
    let adj = EMPTY;
    if (targets.length > 0) {
      let total = 0;
      for (const w of rawWeights) total += w;
      const ids = new Int32Array(targets.length);
      const weights = new Float64Array(targets.length);
      for (let i = 0; i < targets.length; i++) {
        ids[i] = this.idOf(targets[i]!);
        weights[i] = total > 0 ? rawWeights[i]! / total : 0;
      }
      adj = { targets: ids, weights, undamped: undamped && targets.length === 1, local: undefined };
    }
    const slot = this.slotOf(url);
    this.#slots[slot] = adj;
    if (this.#unresolved.size > 0) this.#unresolved.delete(url);
    if (adj.undamped) this.#undamped.add(slot);
    else this.#undamped.delete(slot);
    return adj;
  }

  /**
   * Forgets `url`'s outlinks; call whenever they change (its copy is then sent again, to its
   * new targets too). The page is `unresolved` until its outlinks are read back (`set`): it
   * may have become a redirect.
   */
  invalidate(url: string): void {
    const slot = this.#slotOf.get(url);
    if (slot !== undefined) {
      this.#slots[slot] = undefined;
      if (slot < this.#copySent.length) this.#copySent[slot] = NaN;
      this.#copyOwed.push(slot);
      this.#undamped.delete(slot);
    }
    this.#unresolved.add(url);
  }

  /** The x last sent as `slot`'s copy to its backlinks (NaN: none since the cache or the page's outlinks are new). */
  copySent(slot: number): number {
    return slot < this.#copySent.length ? this.#copySent[slot]! : NaN;
  }

  /** The slots `invalidate`d since the last call (each may be listed more than once), and forgets them. */
  takeCopyOwed(): number[] {
    const owed = this.#copyOwed;
    this.#copyOwed = [];
    return owed;
  }

  /** Records that `slot`'s copy `x` was committed to be sent (call after the write that carries it). */
  setCopySent(slot: number, x: number): void {
    if (slot >= this.#copySent.length) {
      const n = Math.max(slot + 1, 2 * this.#copySent.length);
      const next = new Float64Array(n).fill(NaN);
      next.set(this.#copySent);
      this.#copySent = next;
    }
    this.#copySent[slot] = x;
  }

  /**
   * Marks `url` as a page whose outlinks must be read (`set`) before `undampedSlots` is
   * complete: a page the filling traversal did not cache (it has no `ranks` entry) whose
   * outlinks hold a redirect.
   */
  markUnresolved(url: string): void {
    const slot = this.#slotOf.get(url);
    if (slot === undefined || this.#slots[slot] === undefined) this.#unresolved.add(url);
  }

  /**
   * Pages whose outlinks are not cached because they changed (or were never read): until
   * each is read back with `set`, `undampedSlots` may miss a redirect.
   */
  unresolvedUrls(): string[] {
    return [...this.#unresolved];
  }

  /**
   * Slots of every page whose cached outlinks are one undamped redirect link
   * (`Adjacency.undamped`): complete once the cache is `complete` and `unresolvedUrls` is
   * empty. The metric's stopping bound needs the longest chain they form (coordinator.ts).
   */
  undampedSlots(): ReadonlySet<number> {
    return this.#undamped;
  }

  /** The slot of page `url` (assigned on first sight, with no outlinks cached yet). */
  slotOf(url: string): number {
    let slot = this.#slotOf.get(url);
    if (slot === undefined) {
      slot = this.slotKeys.add(url);
      this.#slotOf.set(url, slot);
      this.#slots.push(undefined);
      if (this.slotKeys.count * 2 > this.#table.length) this.#rehash(this.#table.length * 2);
      else this.#insert(slot);
    }
    return slot;
  }

  /**
   * The slot of the page whose key is `bytes[start, end)`, found by hashing the bytes (no
   * string made), or -1 when no page with that key has a slot yet.
   */
  slotOfBytes(bytes: Uint8Array, start: number, end: number): number {
    const mask = this.#table.length - 1;
    for (let i = hashBytes(bytes, start, end) & mask; ; i = (i + 1) & mask) {
      const slot = this.#table[i]!;
      if (slot < 0) return -1;
      if (this.slotKeys.equals(slot, bytes, start, end)) return slot;
    }
  }

  /** Marks `ranks` as written by someone other than the metric actor (see `ranksEpoch`). */
  ranksChanged(): void {
    this.ranksEpoch++;
  }

  #insert(slot: number): void {
    const mask = this.#table.length - 1;
    let i = hashBytes(this.slotKeys.bytes, this.slotKeys.start(slot), this.slotKeys.end(slot)) & mask;
    while (this.#table[i]! >= 0) i = (i + 1) & mask;
    this.#table[i] = slot;
  }

  #rehash(size: number): void {
    this.#table = new Int32Array(size).fill(-1);
    for (let slot = 0; slot < this.slotKeys.count; slot++) this.#insert(slot);
  }

  /** Outlinks cached in `slot`, or undefined (invalidated: read the store). */
  slotAdjacency(slot: number): Adjacency | undefined {
    return this.#slots[slot];
  }

  /** URL of the page in `slot` (slots are stable, never reused). */
  slotUrl(slot: number): string {
    return this.slotKeys.text(slot);
  }

  /**
   * Compares the key of the page in `slot` with `bytes[start, end)`, without copying:
   * negative, 0 or positive as the slot's key sorts before, equals or after it.
   */
  compareSlotKey(slot: number, bytes: Buffer, start: number, end: number): number {
    return this.slotKeys.compare(slot, bytes, start, end);
  }

  /** Dense id of a target URL (assigned on first sight). */
  idOf(url: string): number {
    let id = this.#ids.get(url);
    if (id === undefined) {
      id = this.targetKeys.add(url);
      this.#ids.set(url, id);
      if (id >= this.#partitionOf.length) {
        this.#partitionOf = grown(this.#partitionOf, id + 1);
        this.#indexInPartition = grown(this.#indexInPartition, id + 1);
      }
      const q = this.partitioner.forUrl(url);
      this.#partitionOf[id] = q;
      this.#indexInPartition[id] = this.#targetsPerPartition[q] ?? 0;
      this.#targetsPerPartition[q] = this.#indexInPartition[id]! + 1;
    }
    return id;
  }

  /** Index of target `id` among the targets of its partition (see `dictionary`). */
  indexInPartition(id: number): number {
    return this.#indexInPartition[id]!;
  }

  /**
   * The slot of the page with key `bytes[start, end)` that sender `dictionary` calls
   * `index`: remembered after the first lookup by bytes, so that later contributions to the
   * same page cost two array reads. Keeps the maps of the `4 x partitions` most recent
   * sender dictionaries (older ones belong to senders that restarted).
   */
  remoteSlot(dictionary: string, index: number, bytes: Uint8Array, start: number, end: number): number {
    let map = this.#remote.get(dictionary);
    if (map === undefined || index >= map.length) {
      map = grown<Int32Array<ArrayBuffer>>(map ?? new Int32Array(0), Math.max(1024, index + 1));
      this.#remote.delete(dictionary);
      this.#remote.set(dictionary, map);
      if (this.#remote.size > 4 * this.partitioner.partitions) this.#remote.delete(this.#remote.keys().next().value!);
    }
    const known = map[index]!;
    if (known > 0) return known - 1;
    const slot = this.slotOfKey(bytes, start, end);
    map[index] = slot + 1;
    return slot;
  }

  /** The slot of the page with key `bytes[start, end)`, assigned on first sight (the URL is decoded only then). */
  slotOfKey(bytes: Uint8Array, start: number, end: number): number {
    const slot = this.slotOfBytes(bytes, start, end);
    return slot >= 0 ? slot : this.slotOf(Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start).toString('utf8'));
  }

  /**
   * The slot of target `id`'s page (a target of this cache's own partition), remembered
   * after the first lookup by key bytes: a push applies the contributions to its own
   * partition's pages in place (metricActor's push) at two array reads per link.
   */
  localSlot(id: number): number {
    if (id >= this.#localSlot.length) this.#localSlot = grown(this.#localSlot, Math.max(1024, id + 1));
    const known = this.#localSlot[id]!;
    if (known > 0) return known - 1;
    const keys = this.targetKeys;
    const slot = this.slotOfKey(keys.bytes, keys.start(id), keys.end(id));
    this.#localSlot[id] = slot + 1;
    return slot;
  }

  /**
   * The slot of each of `targets` that partition `own` holds (see `localSlot`), -1 for a
   * target on another partition: `Adjacency.local`.
   */
  localSlots(targets: Int32Array, own: number): Int32Array {
    const out = new Int32Array(targets.length);
    for (let i = 0; i < targets.length; i++) {
      const id = targets[i]!;
      out[i] = this.#partitionOf[id] === own ? this.localSlot(id) : -1;
    }
    return out;
  }

  /** Partition owning a target id. */
  partitionOf(id: number): number {
    return this.#partitionOf[id]!;
  }

  /** Number of target ids assigned. */
  get targetCount(): number {
    return this.targetKeys.count;
  }
}

/** 32-bit FNV-1a of `bytes[start, end)` (http://www.isthe.com/chongo/tech/comp/fnv/). */
function hashBytes(bytes: Uint8Array, start: number, end: number): number {
  let h = 0x811c9dc5;
  for (let i = start; i < end; i++) h = Math.imul(h ^ bytes[i]!, 0x01000193);
  return h >>> 0;
}
