import type { Broker, Producer } from '../runtime/brokers/broker.js';
import { producerId } from '../runtime/ids.js';
import { replyTopic } from './askWire.js';

/** A reply producer unused this long (ms) is closed when another one opens. */
const IDLE_MS = 60_000;

interface Entry {
  readonly producer: Promise<Producer>;
  /** Sends under way. */
  busy: number;
  lastUsed: number;
}

/**
 * A worker's producers on the reply topics of the clients that ask it (`replyTopic(slot)`),
 * opened at a client's first request and shared by every unit of the worker; one idle for a
 * minute is closed when another opens (a client that left stops costing a producer).
 */
export class ReplyProducers {
  readonly #open = new Map<number, Entry>();

  constructor(
    readonly broker: Broker,
    /** Producer name of every reply producer of this worker. */
    readonly name: string,
  ) {}

  /**
   * Sends `payload` on the reply topic of `slot`.
   * @throws the broker's producer and send errors (PayloadTooLargeError for a payload over its limit)
   */
  async send(slot: number, payload: Uint8Array): Promise<void> {
    let entry = this.#open.get(slot);
    if (!entry) {
      this.#closeIdle();
      const producer = this.broker.producer(replyTopic(slot), { producer: producerId(this.name) });
      entry = { producer, busy: 0, lastUsed: Date.now() };
      this.#open.set(slot, entry);
      producer.catch(() => this.#open.get(slot) === entry && this.#open.delete(slot));
    }
    entry.busy++;
    try {
      await (await entry.producer).send(payload);
    } finally {
      entry.busy--;
      entry.lastUsed = Date.now();
    }
  }

  /** Closes every reply producer. */
  async closeAll(): Promise<void> {
    const all = [...this.#open.values()];
    this.#open.clear();
    await Promise.all(all.map((e) => e.producer.then((p) => p.close(), () => {})));
  }

  #closeIdle(): void {
    const now = Date.now();
    for (const [slot, e] of this.#open) {
      if (e.busy > 0 || now - e.lastUsed < IDLE_MS) continue;
      this.#open.delete(slot);
      void e.producer.then((p) => p.close(), () => {});
    }
  }
}
