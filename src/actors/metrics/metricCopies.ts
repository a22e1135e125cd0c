import { topic } from '../../runtime/brokers/index.js';
import type { PackedKeys, WriteBatch } from '../../storage/index.js';
import { partitionId, type StreamOutbox } from '../../index.js';
import { Namespaces } from '../namespaces.js';
import { contributionCodec, type CopyRuns } from '../messages.js';
import { ColumnFamilies } from '../partition/schema.js';
import { copyStale, encodeBacklinkCopies } from '../backlinks/backlinkValue.js';
import type { AdjacencyCache, Adjacency } from './adjacencyCache.js';
import type { KeyArena } from './keyArena.js';
import { CONTRIBUTIONS_PER_MESSAGE, KEY_BYTES_PER_MESSAGE } from './contributions.js';

/**
 * The copies bound for one partition, in runs (CopyRuns): each source page's slot once,
 * with its x and the count of its targets on that partition, then the targets' ids. Keys
 * stay in the cache's KeyArenas until a message is written (no bytes copied here).
 */
class PackedCopies {
  slots: number[] = [];
  values: number[] = [];
  runs: number[] = [];
  targets: number[] = [];
  /** The `send` call whose run is open here (-1: none). */
  open = -1;
  /** Runs and targets already taken into a contribution message (`MetricCopies.take`). */
  takenRuns = 0;
  takenTargets = 0;

  /** Opens a run for source `slot` with value `x` (the next `target` calls join it). */
  openRun(slot: number, x: number, call: number): void {
    this.slots.push(slot);
    this.values.push(x);
    this.runs.push(0);
    this.open = call;
  }

  target(id: number): void {
    this.targets.push(id);
    this.runs[this.runs.length - 1]!++;
  }
}

/** Keys `ids[i .. j)` of `arena`, as offsets into its buffer (read it before the next add). */
function pickKeys(arena: KeyArena, ids: readonly number[], i: number, j: number): PackedKeys {
  const starts = new Uint32Array(j - i);
  const ends = new Uint32Array(j - i);
  for (let k = i; k < j; k++) {
    starts[k - i] = arena.start(ids[k]!);
    ends[k - i] = arena.end(ids[k]!);
  }
  return { bytes: arena.bytes, starts, ends };
}

/**
 * The copies of source pages' metrics that one push (or repair) sends to the backlinks of
 * their targets on other partitions (docs/ARCHITECTURE.md, "Backlinks carry their source's
 * metric"): a page whose x moved by more than COPY_RELATIVE_BOUND since its copy was last
 * sent (or whose copy was never sent by this process's cache, or whose outlinks changed)
 * sends x to every target of another partition q in `metrics/<q>` messages (the `copies` of
 * ContributionBatch), whose metric actor merges `{m: x}` into the backlink's record (key
 * `target 0x00 source`) with its next commit. `commit` records the sent values in the cache
 * once the write that carries them succeeded.
 */
export class MetricCopies {
  readonly #per: PackedCopies[];
  /** The pages whose copy this push sends, and the x sent (two arrays: no pair object per page). */
  readonly #sentSlots: number[] = [];
  readonly #sentX: number[] = [];
  /** Pages whose copy this push sends to another partition. */
  pages = 0;
  /** Backlinks on other partitions that get a copy (entries in messages). */
  links = 0;

  constructor(readonly cache: AdjacencyCache, readonly own: number) {
    this.#per = Array.from({ length: cache.partitioner.partitions }, () => new PackedCopies());
  }

  /** True when `slot`'s page must send its copy for x now (see `copyStale`). */
  due(slot: number, x: number): boolean {
    return copyStale(this.cache.copySent(slot), x);
  }

  /**
   * Sends x as the copy of page `slot` to each target of `adj` on another partition (a
   * backlink whose source is on the target's own partition needs no copy: the query reads
   * the source's score from that partition's `ranks`).
   */
  send(slot: number, x: number, adj: Adjacency): void {
    const cache = this.cache;
    const { targets } = adj;
    const call = this.#sentSlots.length;
    let remote = 0;
    for (let i = 0; i < targets.length; i++) {
      const id = targets[i]!;
      const q = cache.partitionOf(id);
      if (q === this.own) continue;
      const part = this.#per[q]!;
      if (part.open !== call) part.openRun(slot, x, call);
      part.target(id);
      remote++;
    }
    if (remote > 0) {
      this.links += remote;
      this.pages++;
    }
    this.#sentSlots.push(slot);
    this.#sentX.push(x);
  }

  /** Messages that carried copies so far, and their payload bytes (contributions included). */
  #messages = 0;
  #bytes = 0;

  /**
   * The next copies for partition `q` (whole runs, closed once they hold
   * CONTRIBUTIONS_PER_MESSAGE copies or more, or before their keys pass KEY_BYTES_PER_MESSAGE;
   * a run alone over that is split), taken from those left to send; undefined when none is
   * left. Keys are picked out of the cache's arenas (offsets): encode them before
   * the next await (the codec packs them; a target named by several runs travels once).
   */
  take(q: number): CopyRuns | undefined {
    const part = this.#per[q]!;
    const r0 = part.takenRuns;
    const t0 = part.takenTargets;
    if (r0 >= part.runs.length) return undefined;
    const { slotKeys, targetKeys } = this.cache;
    const bytesOf = (arena: KeyArena, id: number) => arena.end(id) - arena.start(id);
    let r1 = r0;
    let t1 = t0;
    for (let bytes = 0; r1 < part.runs.length && t1 - t0 < CONTRIBUTIONS_PER_MESSAGE; ) {
      const n = part.runs[r1]!;
      let run = bytesOf(slotKeys, part.slots[r1]!);
      for (let k = t1; k < t1 + n; k++) run += bytesOf(targetKeys, part.targets[k]!);
      if (bytes + run <= KEY_BYTES_PER_MESSAGE) {
        bytes += run;
        t1 += n;
        r1++;
        continue;
      }
      if (r1 > r0) break; // the run starts the next message
      // A run alone over the key bytes of a message (a page with many long outlinks): its
      // first targets that fit (one at least) go now, the rest as a run of the same source.
      let k = 1;
      for (run = bytesOf(slotKeys, part.slots[r1]!) + bytesOf(targetKeys, part.targets[t1]!); k < n && run + bytesOf(targetKeys, part.targets[t1 + k]!) <= KEY_BYTES_PER_MESSAGE; k++) run += bytesOf(targetKeys, part.targets[t1 + k]!);
      if (k < n) {
        part.slots.splice(r1 + 1, 0, part.slots[r1]!);
        part.values.splice(r1 + 1, 0, part.values[r1]!);
        part.runs.splice(r1 + 1, 0, n - k);
        part.runs[r1] = k;
      }
      t1 += k;
      r1++;
      break;
    }
    part.takenRuns = r1;
    part.takenTargets = t1;
    return {
      sources: pickKeys(this.cache.slotKeys, part.slots, r0, r1),
      values: Float64Array.from(part.values.slice(r0, r1)),
      runs: Uint32Array.from(part.runs.slice(r0, r1)),
      targets: pickKeys(this.cache.targetKeys, part.targets, t0, t1),
    };
  }

  /** Counts a message of `payloadBytes` that carried copies `take` gave. */
  attached(_q: number, payloadBytes: number): void {
    this.#messages++;
    this.#bytes += payloadBytes;
  }

  /**
   * Enqueues the copies not yet taken into contribution messages (`take`, through
   * `enqueuePartitionContributions`' `attach`) as `metrics/<q>` messages of `round` of their
   * own in `batch`'s outbox.
   * @param sent messages enqueued per partition, added to
   * @param bytes payload bytes enqueued per partition, added to
   * @returns messages that carried copies and their payload bytes (contributions included),
   *   those of `take` too
   */
  async write(outbox: StreamOutbox, batch: WriteBatch, round: number, sent: number[], bytes: number[]): Promise<{ messages: number; bytes: number }> {
    for (let q = 0; q < this.#per.length; q++) {
      for (let copies = this.take(q); copies; copies = this.take(q)) {
        const payload = contributionCodec.encode({ type: 'metrics', round, keys: { bytes: new Uint8Array(0), ends: new Uint32Array(0) }, deltas: new Float64Array(0), copies });
        await outbox.enqueue(batch, topic(Namespaces.metrics, partitionId(q)), payload);
        sent[q] = (sent[q] ?? 0) + 1;
        bytes[q] = (bytes[q] ?? 0) + payload.length;
        this.attached(q, payload.length);
      }
    }
    return { messages: this.#messages, bytes: this.#bytes };
  }

  /** Records the copies sent in the cache; call once the batch given to `write` committed. */
  commit(): void {
    for (let i = 0; i < this.#sentSlots.length; i++) this.cache.setCopySent(this.#sentSlots[i]!, this.#sentX[i]!);
  }
}

/**
 * Copies received in `metrics/<q>` messages and not yet committed: merged into `backlinks`
 * by the metric actor's next commit (flush), with the messages' applied marks, so that a
 * crash before it makes the broker deliver them again.
 */
export class PendingCopies {
  /** The copies of each message kept, and the `record` operand of each of its runs. */
  #messages: Array<{ readonly copies: CopyRuns; readonly operands: PackedKeys }> = [];
  #size = 0;

  /** Copies kept (backlinks to merge). */
  get size(): number {
    return this.#size;
  }

  /** Keeps the copies of one decoded message (views of its bytes, kept until the commit). */
  add(copies: CopyRuns): void {
    this.#messages.push({ copies, operands: encodeBacklinkCopies(copies.values) });
    this.#size += copies.targets.ends.length;
  }

  /** Adds the copies to `batch` as `record` merges into `backlinks`, in one native call. */
  record(batch: WriteBatch): void {
    if (this.#messages.length === 0) return;
    // A backlink's copies replace each other (the record's `m` is lww, and a copy operand
    // sets `m` alone): only the last one of the batch is written, in key order.
    const groups = this.#messages.map(({ copies, operands }) => ({ firsts: copies.targets, seconds: copies.sources, operands, runs: copies.runs }));
    batch.mergePairRuns(ColumnFamilies.backlinks, groups, { lastPerKey: true, keyOrder: true });
  }

  /** Empties this once the batch given to `record` committed. */
  committed(): void {
    this.#messages = [];
    this.#size = 0;
  }
}
