import { FencedError, InjectedFaultError, isShardflowError } from '../../errors.js';
import type { BrokerMessage } from '../brokers/broker.js';

/** Default `StageDef.maxAttempts`: tries of one message whose handler keeps failing before its dead letter. */
export const DEFAULT_MAX_ATTEMPTS = 10;

/** Suspects kept at most (the oldest is forgotten first): a few batches' worth. */
const MAX_SUSPECTS = 10_000;

/**
 * Finds the message that keeps failing its batch, and gives it up after `maxAttempts` tries
 * (Pulsar's `DeadLetterPolicy.maxRedeliverCount`; Kafka Streams' processing exception handler
 * decides per record the same way, KIP-1033). One per stage partition, kept across the
 * partition's restarts.
 *
 * When a batch fails with an error that may be the message's doing (a handler's error, not a
 * store, broker, fencing or injected fault), its messages become suspects; a delivered batch
 * holding a suspect is then applied one message at a time (`isolate`), so a failure names its
 * message, whose tries are counted (`failed`). A message tried `maxAttempts` times alone is
 * dead-lettered with the last error as its reason (`giveUp`) instead of being applied; one
 * applied (`applied`) is no longer a suspect.
 */
export class PoisonMessages {
  readonly #suspects = new Map<string, { tries: number; lastError: string }>();

  /** @param maxAttempts tries alone before the dead letter, >= 1 (`Infinity`: never) */
  constructor(readonly maxAttempts: number) {}

  /** Whether `messages` hold a suspect: apply them one at a time. */
  isolate(messages: readonly BrokerMessage[]): boolean {
    return this.#suspects.size > 0 && messages.some((m) => this.#suspects.has(key(m)));
  }

  /** Records the failure `err` of a batch of `messages` (one message: a try of that message). */
  failed(messages: readonly BrokerMessage[], err: unknown): void {
    if (!mayBeTheMessages(err)) return;
    const lastError = describe(err);
    for (const m of messages) {
      const k = key(m);
      const had = this.#suspects.get(k);
      const tries = (had?.tries ?? 0) + (messages.length === 1 ? 1 : 0);
      this.#suspects.delete(k);
      this.#suspects.set(k, { tries, lastError });
    }
    while (this.#suspects.size > MAX_SUSPECTS) this.#suspects.delete(this.#suspects.keys().next().value!);
  }

  /** The dead-letter reason of `m` when it was tried `maxAttempts` times alone, else undefined. */
  giveUp(m: BrokerMessage): string | undefined {
    const s = this.#suspects.get(key(m));
    if (!s || s.tries < this.maxAttempts) return undefined;
    return `the stage's handlers (onMessage, onBatch) failed on this message ${s.tries} times alone (maxAttempts ${this.maxAttempts}); last error: ${s.lastError}`;
  }

  /** `m` was applied or dead-lettered: no longer a suspect. */
  applied(m: BrokerMessage): void {
    if (this.#suspects.size > 0) this.#suspects.delete(key(m));
  }
}

const key = (m: BrokerMessage): string => `${m.producer}\u0000${m.sequence}`;

/** Failures that say nothing of the message: injected faults, fencing, the store's and the broker's. */
function mayBeTheMessages(err: unknown): boolean {
  if (err instanceof InjectedFaultError || err instanceof FencedError) return false;
  return !(isShardflowError(err) && /^SF_ERR_(STORE|BROKER)_/.test(err.code));
}

function describe(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}
