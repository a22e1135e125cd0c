import { createHash } from 'node:crypto';
import { decodeInt64, encodeInt64 } from '../../operators/mergeOperators.js';
import type { Store, WriteBatch } from '../../storage/index.js';
import type { ProducerId, Sequence } from '../ids.js';
import { sequenceEpoch } from './producerEpoch.js';
import { numbersByOffsets } from './sourceOffsets.js';
import { StreamColumnFamilies, type StreamColumnFamilyNames } from './reserved.js';

/**
 * Whether `producer` is a partition's outbox, named `<owner>@<partition>` (stageActor.ts,
 * actors/partition/streams.ts), whose epoch is the partition's owner epoch: given by a lease,
 * never given twice. An external producer's name has no `@` (`PRODUCER_NAME`) and its epoch
 * comes from a file under its data dir, which a lost or copied data dir gives again: a
 * message of an older epoch of such a producer is never taken for a redelivered copy.
 */
function epochFromLease(producer: string): boolean {
  return producer.includes('@');
}

/** What `StreamMarks.classify` says of a delivered message. */
export type MarkVerdict =
  | { readonly kind: 'new' }
  /** At or below the mark, same or newer epoch: a redelivery of an applied message. */
  | { readonly kind: 'applied' }
  /** From an older producer incarnation than one already applied: dead-letter it with `reason`. */
  | { readonly kind: 'conflict'; readonly reason: string };

const NEW: MarkVerdict = Object.freeze({ kind: 'new' });
const APPLIED: MarkVerdict = Object.freeze({ kind: 'applied' });

/**
 * Last applied sequences kept for a producer's earlier epochs (the newest first): a copy of a
 * message of one of them is told from a message that epoch sent after the next one took over.
 * A partition handed back twice within a checkpoint interval runs three epochs, and every
 * message of the two older ones may be delivered again once the receiver restarts.
 */
export const PREVIOUS_EPOCHS_KEPT = 8;

/**
 * Exactly-once effects over an at-least-once broker: the highest applied (epoch-packed)
 * sequence per producer, kept in the meta family (`sf.meta` unless given another) under
 * `applied 0x00 <consumer> 0x00 <producer>` (int64 LE; marks written without epochs read as
 * epoch 0) and written in the same write batch as the effects, before the ack.
 *
 * When a producer's mark moves to a newer epoch, the last applied sequence of the epoch it
 * leaves is kept too (`applied-epochs 0x00 <consumer> 0x00 <producer>`: int64 LE each, the
 * newest first, at most PREVIOUS_EPOCHS_KEPT), in the same batch. A message of an older
 * epoch than the mark's is then a redelivered copy (`applied`) when its sequence is at most
 * the last one applied of its epoch and the producer is a partition's outbox (its epochs come
 * from leases: `epochFromLease`): per-producer order puts every message of that epoch the
 * receiver applied before the first of the next. Above it, of an epoch no longer kept, or of
 * an external producer (whose epoch file may have been lost, so that an older epoch may be
 * new data), it is a `conflict`: dead-lettered with its reason, never applied, never dropped
 * in silence.
 *
 * Requires per-producer order on a topic, which every broker gives (broker.ts). One writer
 * per `consumer` name and store: the cache is valid only for the incarnation that owns it
 * (drop the object after a failed commit).
 */
export class StreamMarks {
  readonly #cache = new Map<string, number>();
  /** Last applied sequences of earlier epochs per producer, the newest first, when read. */
  readonly #previous = new Map<string, number[]>();
  readonly #family: string;

  /**
   * @param store the store that holds the marks and the effects they guard
   * @param consumer names this set of marks (a stage, an actor kind such as `indexer`)
   * @param columnFamilies where the marks live: its `meta` family (default `sf.meta`), which must exist in `store`
   */
  constructor(readonly store: Store, readonly consumer: string, columnFamilies: Pick<StreamColumnFamilyNames, 'meta'> = StreamColumnFamilies) {
    this.#family = columnFamilies.meta;
  }

  #key(producer: ProducerId): string {
    return `applied\u0000${this.consumer}\u0000${producer}`;
  }

  #previousKey(producer: ProducerId): string {
    return `applied-epochs\u0000${this.consumer}\u0000${producer}`;
  }

  /** Highest applied sequence of `producer`, or -1. */
  async mark(producer: ProducerId): Promise<number> {
    const cached = this.#cache.get(producer);
    if (cached !== undefined) return cached;
    const v = await this.store.get(this.#family, this.#key(producer));
    const mark = v ? Number(decodeInt64(v)) : -1;
    this.#cache.set(producer, mark);
    return mark;
  }

  /** Last applied sequences of `producer`'s earlier epochs, the newest first (empty when none was kept). */
  async previousEpochs(producer: ProducerId): Promise<readonly number[]> {
    const cached = this.#previous.get(producer);
    if (cached !== undefined) return cached;
    const v = await this.store.get(this.#family, this.#previousKey(producer));
    const list: number[] = [];
    for (let i = 0; v && i + 8 <= v.length; i += 8) list.push(Number(decodeInt64(v.subarray(i, i + 8))));
    this.#previous.set(producer, list);
    return list;
  }

  /**
   * Whether `seq` is the next sequence of `producer` after its mark (the mark + 1): an
   * undecodable message moves its producer's mark only then (so that quiet detection, which
   * waits for the marks, counts a real producer's message that does not decode), and records
   * that it took that sequence (`takeUndecodable`). One above may carry a name and sequence that
   * are not its own: it moves nothing (found by new users: one with sequence 2,900 moved the
   * mark there and the real producer's next 557 messages were skipped as applied, in silence;
   * one at the first sequence of a newer epoch made the live producer's later messages an older
   * incarnation's).
   */
  async follows(producer: ProducerId, seq: Sequence): Promise<boolean> {
    return seq === (await this.mark(producer)) + 1;
  }

  /**
   * Records in `batch` that an undecodable message of `producer` with sequence `seq` above its
   * mark was dead-lettered without moving the mark (it did not follow it: the first message of
   * a new epoch, an offsets producer's sparse sequence on this topic, a foreign entry), under
   * `dead-above 0x00 <consumer> 0x00 <producer>`: quiet detection across processes takes a
   * stream whose last sent sequence is this one as applied (`readStreamFlow`,
   * `unappliedStreams`), where the mark alone left it unapplied for ever (found by a new user:
   * `quiescence()` of a cluster waited out its timeout). The marks, and so what is skipped,
   * are unchanged.
   */
  async deadLetteredAbove(batch: { put(cf: string, key: string, value: Uint8Array): unknown }, producer: ProducerId, seq: Sequence): Promise<void> {
    if (seq > (await this.mark(producer))) batch.put(this.#family, `dead-above\u0000${this.consumer}\u0000${producer}`, encodeInt64(seq));
  }

  #takenKey(producer: ProducerId): string {
    return `undecodable\u0000${this.consumer}\u0000${producer}`;
  }

  /**
   * Records in `batch` that an undecodable message took `seq` of `producer` (the sequence and
   * the SHA-1 of its payload, under `undecodable 0x00 <consumer> 0x00 <producer>`, the last one
   * per producer): a message with that sequence and another payload is then not a redelivered
   * copy but a second entry under that name (`takenReason`).
   */
  takeUndecodable(batch: { put(cf: string, key: string, value: Uint8Array): unknown }, producer: ProducerId, seq: Sequence, payload: Uint8Array): void {
    const value = Buffer.concat([encodeInt64(seq), sha1(payload)]);
    batch.put(this.#family, this.#takenKey(producer), value);
    this.#taken.set(producer, value);
  }

  /**
   * For a message classified `applied`: the reason to dead-letter it with when an undecodable
   * message with another payload took its sequence (`takeUndecodable`), else undefined (a copy).
   */
  async takenReason(producer: ProducerId, seq: Sequence, payload: Uint8Array): Promise<string | undefined> {
    let v = this.#taken.get(producer);
    if (v === undefined) {
      v = (await this.store.get(this.#family, this.#takenKey(producer))) ?? EMPTY;
      this.#taken.set(producer, v);
    }
    if (v.length !== 28 || Number(decodeInt64(v.subarray(0, 8))) !== seq || sha1(payload).equals(v.subarray(8))) return undefined;
    return `producer ${producer} sequence ${seq} was taken by an undecodable entry dead-lettered before, with another payload: two producers under one name, or a foreign entry under this producer's name`;
  }

  /** The last undecodable message's record per producer, when read or written (`takeUndecodable`). */
  readonly #taken = new Map<string, Buffer>();

  /** Whether `(producer, seq)` is new, a redelivery, or from a fenced-off older incarnation. */
  async classify(producer: ProducerId, seq: Sequence): Promise<MarkVerdict> {
    const mark = await this.mark(producer);
    const epoch = sequenceEpoch(seq);
    const markEpoch = sequenceEpoch(mark);
    if (seq > mark) {
      // Moving to a newer epoch: read the kept ones, so that advance/record can add this one.
      if (mark >= 0 && epoch > markEpoch) await this.previousEpochs(producer);
      return NEW;
    }
    // A source-offsets producer has no epochs: at or below the mark is applied (its input sent
    // again after a crash), whatever range of offsets it is in.
    if (epoch >= markEpoch || numbersByOffsets(producer)) return APPLIED;
    const last = (await this.previousEpochs(producer)).find((s) => sequenceEpoch(s) === epoch);
    const leased = epochFromLease(producer);
    if (leased && last !== undefined && seq <= last) return APPLIED;
    const n = seq - epoch * 2 ** 32;
    return {
      kind: 'conflict',
      reason:
        `producer ${producer} epoch ${epoch} (sequence ${n}) is older than its epoch ${markEpoch} already applied by ${this.consumer}, ` +
        (!leased
          ? `a fenced-off older incarnation of the producer (two processes sending under one producer name?), a producer started again with its epoch file lost or copied (<dataDir>/producers/${producer}.epoch: it gave an epoch already used), or a message of an earlier incarnation delivered again after a newer one's was applied`
          : last !== undefined
            ? `and was sent after the last message of epoch ${epoch} applied before it (sequence ${last - epoch * 2 ** 32}): a fenced-off older incarnation went on sending (two processes sending under one producer name?)`
            : 'a fenced-off older incarnation of the producer (two processes sending under one producer name?)'),
    };
  }

  /**
   * Moves the cached mark of `producer` to `seq` without writing it: a batch that applies
   * several messages of one producer advances per message (so a copy later in the same batch
   * classifies as applied) and `record`s only the last one. The caller must `record` before
   * its commit, or drop this object when the commit fails.
   */
  advance(producer: ProducerId, seq: Sequence): void {
    this.#keepEpoch(producer, seq);
    this.#cache.set(producer, seq);
  }

  /** Adds the new mark to `batch` (the batch that carries the message's effects) and to the cache. */
  record(batch: WriteBatch, producer: ProducerId, seq: Sequence): void {
    if (this.#keepEpoch(producer, seq) || this.#dirty.has(producer)) {
      const list = this.#previous.get(producer) ?? [];
      batch.put(this.#family, this.#previousKey(producer), Buffer.concat(list.map((s) => encodeInt64(s))));
      this.#dirty.delete(producer);
    }
    batch.put(this.#family, this.#key(producer), encodeInt64(seq));
    this.#cache.set(producer, seq);
  }

  /** Producers whose kept epochs `advance` changed and no `record` wrote yet. */
  readonly #dirty = new Set<string>();

  /**
   * When `seq` is of a newer epoch than the cached mark, keeps the mark as the last applied
   * sequence of its epoch (in the cache; `record` writes it). @returns true when it did
   */
  #keepEpoch(producer: ProducerId, seq: Sequence): boolean {
    const mark = this.#cache.get(producer);
    if (mark === undefined || mark < 0 || sequenceEpoch(seq) <= sequenceEpoch(mark)) return false;
    const list = [mark, ...(this.#previous.get(producer) ?? []).filter((s) => sequenceEpoch(s) !== sequenceEpoch(mark))].slice(0, PREVIOUS_EPOCHS_KEPT);
    this.#previous.set(producer, list);
    this.#dirty.add(producer);
    return true;
  }
}

const EMPTY = Buffer.alloc(0);

function sha1(payload: Uint8Array): Buffer {
  return createHash('sha1').update(payload).digest();
}
