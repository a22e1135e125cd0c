import type { Store, WriteBatch } from '../../storage/index.js';
import type { BrokerMessage } from '../brokers/broker.js';
import { StreamColumnFamilies } from './reserved.js';

/**
 * The dead letters a stage partition decided in a batch, kept until the broker took them.
 *
 * A dead-lettered message is covered by its producer's applied mark (committed with the
 * batch), so a copy the broker delivers again is skipped as applied. If the process dies
 * after the commit and before `consumer.deadLetter`, that copy would then be acked and its
 * dead letter lost. So the reason is written with the batch, in `sf.meta` under
 * `dead 0x00 <owner> 0x00 <producer> 0x00 <sequence>` (UTF-8 reason), a redelivered copy
 * found applied is dead-lettered again with the stored reason instead of acked, and the rows
 * are deleted once the broker took the batch's dead letters. A row outlives its dead letter
 * only when the process dies between the two (a few bytes; sequences never repeat).
 * Cost: one point read per redelivered message, one write per batch with dead letters.
 */
export class DeadLetterRows {
  /** @param owner the consumer name the rows belong to (the stage; `StreamMarks.consumer`) */
  constructor(readonly store: Store, readonly owner: string) {}

  #key(m: BrokerMessage): string {
    return `dead\u0000${this.owner}\u0000${m.producer}\u0000${m.sequence}`;
  }

  /** Adds the row of `m` to `batch`, the batch that commits its applied mark. */
  record(batch: { put(cf: string, key: string, value: Uint8Array): unknown }, m: BrokerMessage, reason: string): void {
    batch.put(StreamColumnFamilies.meta, this.#key(m), Buffer.from(reason, 'utf8'));
  }

  /** The stored reason of a message already applied (a redelivered copy), or undefined when it was not dead-lettered. */
  async reasonOf(m: BrokerMessage): Promise<string | undefined> {
    const v = await this.store.get(StreamColumnFamilies.meta, this.#key(m));
    return v?.toString('utf8');
  }

  /** Deletes the rows of `messages` (their dead letters were taken by the broker). */
  async settled(messages: Iterable<BrokerMessage>): Promise<void> {
    const batch = this.store.batch();
    for (const m of messages) batch.delete(StreamColumnFamilies.meta, this.#key(m));
    if (batch.length > 0) await this.store.write(batch);
  }
}
