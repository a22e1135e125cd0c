import { isTerminalError } from '../../errors.js';
import type { ActorRef } from '../actor/ref.js';
import type { Clock } from '../clock.js';

/** Options of {@link askWithRetry}. */
export interface AskRetryOptions {
  /** Tries after the first, default 20. */
  readonly retries?: number;
  /** Timeout of each try in ms, default 60 000. */
  readonly timeoutMs?: number;
}

/**
 * Asks the actor `ref()` names, trying again after a failure (a restart in progress, an
 * injected fault, a timeout) with exponential backoff from 10 ms, doubling, at most 500 ms
 * between tries. `ref` is called for each try, so a restarted actor is looked up again.
 * Errors marked terminal (`terminalError`: the topology stopped) are not retried.
 * @throws the last try's error after `retries` retries
 */
export async function askWithRetry<M, R>(ref: () => ActorRef<M, R>, message: M, clock: Clock, options: AskRetryOptions = {}): Promise<R> {
  const retries = options.retries ?? 20;
  const timeoutMs = options.timeoutMs ?? 60_000;
  for (let i = 0; ; i++) {
    try {
      return await ref().ask(message, { timeoutMs });
    } catch (err) {
      if (i >= retries || isTerminalError(err)) throw err;
      await new Promise<void>((resolve) => clock.setTimeout(resolve, Math.min(500, 10 * 2 ** i)));
    }
  }
}
