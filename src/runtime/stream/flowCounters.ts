import { topicName, type Topic } from '../topics.js';

/**
 * Flow counters of one process: messages sent and settled (acked or dead-lettered) per
 * namespace, and units of local work in progress (a poke waiting in a crawl policy, an
 * outbox being drained). Generic: the web index and every `Topology` keep one. They drive the progress display and the quiescence check that
 * ends a crawl: the flow is quiet when, twice in a row, every namespace has settled what it
 * sent and no local work is in progress (the "four counter" method of Mattern, 1987,
 * "Algorithms for distributed termination detection", Distributed Computing 2(3)).
 *
 * Each message counts once on each side, whatever the broker does. A message with its key
 * (producer, topic, sequence) is recorded as in flight when sent and counts as settled only
 * while it is in flight: a copy the broker delivers again after losing an ack (a broker
 * restart), or a message a previous process sent, settles nothing. A send that fails is
 * taken back (`onSendFailed`); an outbox replayed after a crash sends its rows again, and
 * each is in flight again until its copy is settled.
 */
export class FlowCounters {
  readonly sent = new Map<string, number>();
  readonly settled = new Map<string, number>();
  /** Per producer and topic, the sequences sent and not yet settled. */
  readonly #inFlight = new Map<string, Set<number>>();
  #busy = 0;
  #epoch = 0;

  /**
   * Called before a message is handed to the broker (before, so that it is in flight before
   * anyone can settle it). Messages of a namespace whose receivers settle by key must be
   * sent with their key.
   * @returns false when `key` is in flight already (sent twice before settling), and nothing changed
   */
  onSent(ns: string, key?: MessageKey): boolean {
    if (key) {
      const pair = pairOf(key);
      let seqs = this.#inFlight.get(pair);
      if (!seqs) this.#inFlight.set(pair, (seqs = new Set()));
      if (seqs.has(key.sequence)) return false;
      seqs.add(key.sequence);
    }
    this.sent.set(ns, (this.sent.get(ns) ?? 0) + 1);
    this.#epoch++;
    return true;
  }

  /**
   * A send counted as in flight: `onSent(ns, key)`, then `send()`; if that throws, the
   * count is taken back (when it was taken) and the error rethrown.
   */
  async sending<T>(ns: string, key: MessageKey, send: () => Promise<T>): Promise<T> {
    const counted = this.onSent(ns, key);
    try {
      return await send();
    } catch (err) {
      if (counted) this.onSendFailed(ns, key);
      throw err;
    }
  }

  /** Takes back an `onSent` whose send failed. */
  onSendFailed(ns: string, key?: MessageKey): void {
    if (key) {
      const pair = pairOf(key);
      const seqs = this.#inFlight.get(pair);
      if (!seqs?.delete(key.sequence)) return;
      if (seqs.size === 0) this.#inFlight.delete(pair);
    }
    this.sent.set(ns, (this.sent.get(ns) ?? 0) - 1);
    this.#epoch++;
  }

  /**
   * Called when a message is acked or dead-lettered.
   * @returns false when `key` is not in flight (a copy settled already, or sent by another
   *   process), and nothing changed
   */
  onSettled(ns: string, key?: MessageKey): boolean {
    if (key) {
      const pair = pairOf(key);
      const seqs = this.#inFlight.get(pair);
      if (!seqs?.delete(key.sequence)) return false;
      if (seqs.size === 0) this.#inFlight.delete(pair);
    }
    this.settled.set(ns, (this.settled.get(ns) ?? 0) + 1);
    this.#epoch++;
    return true;
  }

  /** Marks local work that will send messages later; pair with `done()`. */
  begin(): void {
    this.#busy++;
    this.#epoch++;
  }

  done(): void {
    this.#busy--;
    this.#epoch++;
  }

  /** True when nothing is in flight right now. */
  balanced(): boolean {
    if (this.#busy !== 0) return false;
    for (const [ns, n] of this.sent) if ((this.settled.get(ns) ?? 0) !== n) return false;
    return true;
  }

  /** Changes every time a counter moves: equal epochs mean nothing happened in between. */
  epoch(): number {
    return this.#epoch;
  }
}

/** Identity of one message for the counters: who sent it where, and its sequence there. */
export interface MessageKey {
  readonly producer: string;
  /** Topic name (`namespace/partition`). */
  readonly topic: string;
  readonly sequence: number;
}

function pairOf(key: MessageKey): string {
  return `${key.producer}\u0000${key.topic}`;
}

/** The counters' key of a broker message. */
export function messageKey(m: { readonly producer: string; readonly topic: Topic; readonly sequence: number }): MessageKey {
  return { producer: m.producer, topic: topicName(m.topic), sequence: m.sequence };
}
