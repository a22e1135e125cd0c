import type { SupervisorStrategy } from '../supervision/strategy.js';

/**
 * What a full bounded mailbox does with one more message:
 * - `'backpressure'`: `tell`/`ask` wait until there is space (FIFO among waiting senders);
 * - `'drop-newest'`: the new message is dropped (`tell` resolves, `ask` rejects `MailboxFullError`),
 *   counted as `dropped` in `tree()`;
 * - `'fail'`: `tell`/`ask` reject with `MailboxFullError`.
 */
export type OverflowPolicy = 'backpressure' | 'drop-newest' | 'fail';

/** Mailbox bound. Without one the mailbox is unbounded. */
export interface MailboxOptions {
  /** Maximum number of queued messages, an integer >= 1 (`Infinity` = unbounded). */
  readonly capacity: number;
  /** Default `'backpressure'`. */
  readonly overflow?: OverflowPolicy;
}

/** Options of `spawn`. */
export interface SpawnOptions {
  /** Default: unbounded. */
  readonly mailbox?: MailboxOptions;
  /**
   * How this actor's failures are handled. Default: the enclosing supervisor's strategy for children
   * of `system.supervise`, otherwise `SupervisorStrategy.default`.
   */
  readonly supervision?: SupervisorStrategy;
}
