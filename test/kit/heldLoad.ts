import type { Broker } from '../../src/index.js';

/** A broker whose producers hold their sends after the first `passing` of them, until `release()`. */
export interface HeldLoad {
  readonly broker: Broker;
  /** Resolves when `passing` sends have resolved and the next one is held. */
  readonly held: Promise<void>;
  /** Lets the held sends (and every later one) through. */
  release(): void;
}

/**
 * Wraps `inner` so that a loader using it sends its first `passing` messages, then waits:
 * a test can act (kill a worker) at a seeded point of a load, whatever the machine's speed,
 * and then release the rest. Its `close` closes `inner`.
 */
export function holdLoadAfter(inner: Broker, passing: number): HeldLoad {
  let sent = 0;
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  let reached!: () => void;
  const held = new Promise<void>((r) => (reached = r));
  const broker: Broker = {
    kind: inner.kind,
    ...(inner.identity ? { identity: inner.identity } : {}),
    producer: async (t, options) => {
      const p = await inner.producer(t, options);
      return {
        topic: p.topic,
        producer: p.producer,
        send: async (payload, sendOptions) => {
          if (sent >= passing) {
            reached();
            await gate;
          }
          sent++;
          return p.send(payload, sendOptions);
        },
        flush: () => p.flush(),
        close: () => p.close(),
      };
    },
    subscribe: (t, options) => inner.subscribe(t, options),
    deadLetters: (t, subscription) => inner.deadLetters(t, subscription),
    close: () => inner.close(),
  };
  return { broker, held, release: () => open() };
}
