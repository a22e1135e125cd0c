import type { Behavior } from '../runtime/actor/index.js';

/**
 * A probe actor (Pekko `TestProbe`): its behaviour records every message it receives, in order,
 * and replies to `ask` with `reply(message)` (default `undefined`).
 */
export interface Probe<M, R = void> {
  /** Spawn this to get the probe actor. */
  readonly behavior: Behavior<M, void, R>;
  /** Messages received so far, in order, over all incarnations. */
  readonly messages: M[];
  /** Resolves with the next message received (or the oldest one not yet taken by `next`). */
  next(): Promise<M>;
}

/** Creates a probe; `kind` defaults to `'probe'`. */
export function createProbe<M, R = void>(options: { readonly kind?: string; readonly reply?: (message: M) => R } = {}): Probe<M, R> {
  const messages: M[] = [];
  const waiting: ((message: M) => void)[] = [];
  let taken = 0;
  const behavior: Behavior<M, void, R> = {
    kind: options.kind ?? 'probe',
    start: () => undefined,
    receive: (_state, message) => {
      messages.push(message);
      const waiter = waiting.shift();
      if (waiter !== undefined) {
        taken++;
        waiter(message);
      }
      return options.reply ? options.reply(message) : (undefined as R);
    },
  };
  return {
    behavior,
    messages,
    next(): Promise<M> {
      if (taken < messages.length) return Promise.resolve(messages[taken++] as M);
      return new Promise<M>((resolve) => waiting.push(resolve));
    },
  };
}
