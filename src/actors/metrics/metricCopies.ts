import { topic } from '../../runtime/brokers/index.js';
import type { WriteBatch } from '../../storage/index.js';
import { partitionId, type StreamOutbox } from '../../index.js';
import { Namespaces } from '../namespaces.js';
import { contributionCodec } from '../messages.js';
import { ColumnFamilies } from '../partition/schema.js';
import { copyStale, encodeBacklinkCopy } from '../backlinks/backlinkValue.js';
import type { AdjacencyCache, Adjacency } from './adjacencyCache.js';
import type { KeyArena } from './keyArena.js';
import { CONTRIBUTIONS_PER_MESSAGE } from './contributions.js';

/** Backlink keys (`target 0x00 source`) packed in one growing buffer, with a value each. */
class PackedCopies {
  bytes = Buffer.allocUnsafe(4096);
  used = 0;
  ends: number[] = [];
  values: number[] = [];

  add(target: KeyArena, id: number, source: KeyArena, slot: number, x: number): void {
    const ts = target.start(id);
    const te = target.end(id);
    const ss = source.start(slot);
    const se = source.end(slot);
    const need = this.used + (te - ts) + 1 + (se - ss);
    if (need > this.bytes.length) {
      const next = Buffer.allocUnsafe(Math.max(need, 2 * this.bytes.length));
      this.bytes.copy(next, 0, 0, this.used);
      this.bytes = next;
    }
    // Byte loops, not Buffer#copy: keys are tens of bytes, and copy's per-call checks cost
    // more than the bytes (5 s of a cnr-2000 run's main thread).
    const out = this.bytes;
    let at = this.used;
    const tb = target.bytes;
    for (let i = ts; i < te; i++) out[at++] = tb[i]!;
    out[at++] = 0;
    const sb = source.bytes;
    for (let i = ss; i < se; i++) out[at++] = sb[i]!;
    this.used = at;
    this.ends.push(this.used);
    this.values.push(x);
  }
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
    let remote = 0;
    for (let i = 0; i < targets.length; i++) {
      const id = targets[i]!;
      const q = cache.partitionOf(id);
      if (q === this.own) continue;
      this.#per[q]!.add(cache.targetKeys, id, cache.slotKeys, slot, x);
      remote++;
    }
    if (remote > 0) {
      this.links += remote;
      this.pages++;
    }
    this.#sentSlots.push(slot);
    this.#sentX.push(x);
  }

  /**
   * Enqueues the copies as `metrics/<q>` messages of `round` in `batch`'s outbox (at most
   * CONTRIBUTIONS_PER_MESSAGE copies each).
   * @param sent messages enqueued per partition, added to
   * @param bytes payload bytes enqueued per partition, added to
   * @returns messages and payload bytes of the copies' messages
   */
  async write(outbox: StreamOutbox, batch: WriteBatch, round: number, sent: number[], bytes: number[]): Promise<{ messages: number; bytes: number }> {
    let total = 0;
    let messages = 0;
    for (let q = 0; q < this.#per.length; q++) {
      const part = this.#per[q]!;
      for (let i = 0; i < part.ends.length; i += CONTRIBUTIONS_PER_MESSAGE) {
        const end = Math.min(part.ends.length, i + CONTRIBUTIONS_PER_MESSAGE);
        const from = i === 0 ? 0 : part.ends[i - 1]!;
        const ends = new Uint32Array(end - i);
        for (let k = i; k < end; k++) ends[k - i] = part.ends[k]! - from;
        const payload = contributionCodec.encode({
          type: 'metrics',
          round,
          keys: { bytes: new Uint8Array(0), ends: new Uint32Array(0) },
          deltas: new Float64Array(0),
          copies: { keys: { bytes: part.bytes.subarray(from, part.ends[end - 1]!), ends }, values: Float64Array.from(part.values.slice(i, end)) },
        });
        await outbox.enqueue(batch, topic(Namespaces.metrics, partitionId(q)), payload);
        sent[q] = (sent[q] ?? 0) + 1;
        bytes[q] = (bytes[q] ?? 0) + payload.length;
        total += payload.length;
        messages++;
      }
    }
    return { messages, bytes: total };
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
  #keys: Uint8Array[] = [];
  #operands: Buffer[] = [];

  get size(): number {
    return this.#keys.length;
  }

  /** Keeps the copies of one decoded message. */
  add(copies: { readonly keys: { readonly bytes: Uint8Array; readonly ends: Uint32Array }; readonly values: Float64Array }): void {
    const { bytes, ends } = copies.keys;
    let start = 0;
    for (let i = 0; i < ends.length; i++) {
      const end = ends[i]!;
      // A view, not a copy: the decoded message's bytes are kept until the commit.
      this.#keys.push(bytes.subarray(start, end));
      this.#operands.push(encodeBacklinkCopy(copies.values[i]!));
      start = end;
    }
  }

  /** Adds the copies to `batch` as `record` merges into `backlinks`. */
  record(batch: WriteBatch): void {
    if (this.#keys.length > 0) batch.mergeMany(ColumnFamilies.backlinks, this.#keys, this.#operands);
  }

  /** Empties this once the batch given to `record` committed. */
  committed(): void {
    this.#keys = [];
    this.#operands = [];
  }
}
