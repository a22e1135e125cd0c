import { decodeInt64, encodeInt64 } from '../../operators/mergeOperators.js';
import type { Store, WriteBatch } from '../../storage/index.js';
import type { ProducerId, Sequence } from '../../runtime/ids.js';
import { ColumnFamilies } from './schema.js';

/**
 * Exactly-once effects over an at-least-once broker (docs/ARCHITECTURE.md, "Exactly-once effects over an at-least-once broker"): the highest applied
 * sequence per producer, kept in `meta` under `applied 0x00 <consumer> 0x00 <producer>` and
 * written in the same write batch as the effects, before the ack. A message at or below
 * the mark was applied already (a redelivery after a crash between commit and ack) and is
 * skipped.
 *
 * Requires per-producer order on a topic, which every broker gives (broker.ts). One writer
 * per `consumer` name: the cache is only valid for the actor that owns the marks.
 */
export class AppliedMarks {
  readonly #cache = new Map<string, number>();
  constructor(readonly store: Store, readonly consumer: string) {}

  #key(producer: ProducerId): string {
    return `applied\u0000${this.consumer}\u0000${producer}`;
  }

  /** Highest applied sequence of `producer`, or -1. */
  async mark(producer: ProducerId): Promise<number> {
    const cached = this.#cache.get(producer);
    if (cached !== undefined) return cached;
    const v = await this.store.get(ColumnFamilies.meta, this.#key(producer));
    const mark = v ? Number(decodeInt64(v)) : -1;
    this.#cache.set(producer, mark);
    return mark;
  }

  /** True when `(producer, seq)` was applied already. */
  async applied(producer: ProducerId, seq: Sequence): Promise<boolean> {
    return seq <= (await this.mark(producer));
  }

  /**
   * Adds the new mark to `batch` (the batch that carries the message's effects) and to the
   * cache. If the batch then fails to commit, the owning actor must restart (which drops
   * this object) rather than go on.
   */
  record(batch: WriteBatch, producer: ProducerId, seq: Sequence): void {
    batch.put(ColumnFamilies.meta, this.#key(producer), encodeInt64(seq));
    this.#cache.set(producer, seq);
  }
}
