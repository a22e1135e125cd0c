import { topicName, type Topic } from '../topics.js';
import { InFlightSequences } from './inFlightSequences.js';

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
  /**
   * Per producer, then per topic name, the sequences sent and not yet settled (nested maps:
   * no key string is built per message; a bit per sequence, see InFlightSequences).
   */
  readonly #inFlight = new Map<string, Map<string, InFlightSequences>>();
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
      let topics = this.#inFlight.get(key.producer);
      if (!topics) this.#inFlight.set(key.producer, (topics = new Map()));
      let seqs = topics.get(key.topic);
      if (!seqs) topics.set(key.topic, (seqs = new InFlightSequences()));
      if (!seqs.add(key.sequence)) return false;
    }
    this.sent.set(ns, (this.sent.get(ns) ?? 0) + 1);
    this.#epoch++;
    return true;
  }

  /**
   * A send counted as in flight: `onSent(ns, key)`, then `send()`; if that throws (or its
   * promise rejects), the count is taken back (when it was taken) and the error rethrown.
   */
  sending<T>(ns: string, key: MessageKey, send: () => Promise<T>): Promise<T> {
    const counted = this.onSent(ns, key);
    let sent: Promise<T>;
    try {
      sent = send();
    } catch (err) {
      if (counted) this.onSendFailed(ns, key);
      return Promise.reject(err);
    }
    if (!counted) return sent;
    return sent.catch((err: unknown) => {
      this.onSendFailed(ns, key);
      throw err;
    });
  }

  /** Takes back an `onSent` whose send failed. */
  onSendFailed(ns: string, key?: MessageKey): void {
    if (key && !this.#take(key.producer, key.topic, key.sequence)) return;
    this.sent.set(ns, (this.sent.get(ns) ?? 0) - 1);
    this.#epoch++;
  }

  /**
   * Called when a message is acked or dead-lettered.
   * @returns false when `key` is not in flight (a copy settled already, or sent by another
   *   process), and nothing changed
   */
  onSettled(ns: string, key?: MessageKey): boolean {
    if (key && !this.#take(key.producer, key.topic, key.sequence)) return false;
    this.settled.set(ns, (this.settled.get(ns) ?? 0) + 1);
    this.#epoch++;
    return true;
  }

  /**
   * `onSettled(ns, messageKey(m))` for each of `messages` (acked or dead-lettered), counted
   * at once: one lookup per run of messages of one producer and topic, no key built per
   * message, one change of the epoch. A message not in flight settles nothing, as there.
   * @returns how many of `messages` were in flight and are now settled
   */
  onSettledMessages(ns: string, messages: readonly SettledMessage[]): number {
    let n = 0;
    let producer: string | undefined;
    let topic: Topic | undefined;
    let name = '';
    let seqs: InFlightSequences | undefined;
    for (const m of messages) {
      if (m.producer !== producer || m.topic !== topic) {
        if (producer !== undefined) this.#dropIfEmpty(producer, name);
        producer = m.producer;
        topic = m.topic;
        name = topicName(topic);
        seqs = this.#inFlight.get(producer)?.get(name);
      }
      if (seqs?.delete(m.sequence)) n++;
    }
    if (producer !== undefined) this.#dropIfEmpty(producer, name);
    if (n > 0) {
      this.settled.set(ns, (this.settled.get(ns) ?? 0) + n);
      this.#epoch++;
    }
    return n;
  }

  /** Removes `sequence` from the in-flight set of `(producer, topic)`; false when it was not there. */
  #take(producer: string, topic: string, sequence: number): boolean {
    const topics = this.#inFlight.get(producer);
    const seqs = topics?.get(topic);
    if (!seqs?.delete(sequence)) return false;
    if (seqs.size === 0) this.#dropIfEmpty(producer, topic);
    return true;
  }

  #dropIfEmpty(producer: string, topic: string): void {
    const topics = this.#inFlight.get(producer);
    if (topics?.get(topic)?.size !== 0) return;
    topics.delete(topic);
    if (topics.size === 0) this.#inFlight.delete(producer);
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

/** What `onSettledMessages` reads of a broker message. */
export interface SettledMessage {
  readonly producer: string;
  readonly topic: Topic;
  readonly sequence: number;
}

/** The counters' key of a broker message. */
export function messageKey(m: { readonly producer: string; readonly topic: Topic; readonly sequence: number }): MessageKey {
  return { producer: m.producer, topic: topicName(m.topic), sequence: m.sequence };
}
