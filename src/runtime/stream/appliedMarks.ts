import { decodeInt64, encodeInt64 } from '../../operators/mergeOperators.js';
import type { Store, WriteBatch } from '../../storage/index.js';
import type { ProducerId, Sequence } from '../ids.js';
import { sequenceEpoch } from './producerEpoch.js';
import { StreamColumnFamilies, type StreamColumnFamilyNames } from './reserved.js';

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
 * Exactly-once effects over an at-least-once broker: the highest applied (epoch-packed)
 * sequence per producer, kept in the meta family (`sf.meta` unless given another) under
 * `applied 0x00 <consumer> 0x00 <producer>` (int64 LE; marks written without epochs read as
 * epoch 0) and written in the same write batch as the effects, before the ack.
 *
 * Requires per-producer order on a topic, which every broker gives (broker.ts). One writer
 * per `consumer` name and store: the cache is valid only for the incarnation that owns it
 * (drop the object after a failed commit).
 */
export class StreamMarks {
  readonly #cache = new Map<string, number>();
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

  /** Highest applied sequence of `producer`, or -1. */
  async mark(producer: ProducerId): Promise<number> {
    const cached = this.#cache.get(producer);
    if (cached !== undefined) return cached;
    const v = await this.store.get(this.#family, this.#key(producer));
    const mark = v ? Number(decodeInt64(v)) : -1;
    this.#cache.set(producer, mark);
    return mark;
  }

  /** Whether `(producer, seq)` is new, a redelivery, or from a fenced-off older incarnation. */
  async classify(producer: ProducerId, seq: Sequence): Promise<MarkVerdict> {
    const mark = await this.mark(producer);
    if (seq > mark) return NEW;
    const epoch = sequenceEpoch(seq);
    const markEpoch = sequenceEpoch(mark);
    if (epoch >= markEpoch) return APPLIED;
    return {
      kind: 'conflict',
      reason:
        `producer ${producer} epoch ${epoch} (sequence ${seq - epoch * 2 ** 32}) is older than its epoch ${markEpoch} already applied by ${this.consumer}: ` +
        'a fenced-off older incarnation of the producer (two processes sending under one producer name?)',
    };
  }

  /**
   * Moves the cached mark of `producer` to `seq` without writing it: a batch that applies
   * several messages of one producer advances per message (so a copy later in the same batch
   * classifies as applied) and `record`s only the last one. The caller must `record` before
   * its commit, or drop this object when the commit fails.
   */
  advance(producer: ProducerId, seq: Sequence): void {
    this.#cache.set(producer, seq);
  }

  /** Adds the new mark to `batch` (the batch that carries the message's effects) and to the cache. */
  record(batch: WriteBatch, producer: ProducerId, seq: Sequence): void {
    batch.put(this.#family, this.#key(producer), encodeInt64(seq));
    this.#cache.set(producer, seq);
  }
}
