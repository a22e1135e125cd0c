import type { Cancel, Clock } from '../clock.js';
import { AskTimeoutError } from '../../errors.js';

/**
 * The pending answer to one `ask`: settles its promise at most once and cancels its timeout
 * timer when it settles. Created only for asks; a `tell` carries no reply (no allocation).
 */
export class Reply<R> {
  #resolve: ((value: R) => void) | undefined;
  #reject: ((error: unknown) => void) | undefined;
  #cancelTimer: Cancel | undefined;

  constructor(resolve: (value: R) => void, reject: (error: unknown) => void) {
    this.#resolve = resolve;
    this.#reject = reject;
  }

  /** Rejects with `AskTimeoutError` after `timeoutMs` of `clock` time unless settled before (`Infinity`: never). */
  arm(clock: Clock, timeoutMs: number, path: string): void {
    if (timeoutMs === Infinity) return;
    this.#cancelTimer = clock.setTimeout(
      () => this.reject(new AskTimeoutError(`ask to ${path} got no reply within ${timeoutMs} ms`)),
      timeoutMs,
    );
  }

  /** Fulfils the ask; a no-op once settled. */
  resolve(value: R): void {
    const resolve = this.#resolve;
    if (resolve === undefined) return;
    this.#settle();
    resolve(value);
  }

  /** Rejects the ask; a no-op once settled. */
  reject(error: unknown): void {
    const reject = this.#reject;
    if (reject === undefined) return;
    this.#settle();
    reject(error);
  }

  #settle(): void {
    this.#resolve = undefined;
    this.#reject = undefined;
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
  }
}
