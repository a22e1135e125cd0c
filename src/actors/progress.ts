import type { Namespace } from '../runtime/topics.js';

/**
 * Flow counters of one process: messages sent and settled (acked or dead-lettered) per
 * namespace, and units of local work in progress (a poke waiting in a crawl policy, an
 * outbox being drained). They drive the progress display and the quiescence check that
 * ends a crawl: the flow is quiet when, twice in a row, every namespace has settled what it
 * sent and no local work is in progress (the "four counter" method of Mattern, 1987,
 * "Algorithms for distributed termination detection", Distributed Computing 2(3)).
 *
 * Redelivered copies count as sent again when an outbox is replayed and as settled when
 * acked, so a crash in the middle keeps the balance.
 */
export class FlowCounters {
  readonly sent = new Map<Namespace, number>();
  readonly settled = new Map<Namespace, number>();
  #busy = 0;
  #epoch = 0;

  /** Called before a message is handed to the broker. */
  onSent(ns: Namespace, n = 1): void {
    this.sent.set(ns, (this.sent.get(ns) ?? 0) + n);
    this.#epoch++;
  }

  /** Called when a message is acked or dead-lettered. */
  onSettled(ns: Namespace, n = 1): void {
    this.settled.set(ns, (this.settled.get(ns) ?? 0) + n);
    this.#epoch++;
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
