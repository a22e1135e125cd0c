/** Options of {@link ActorRef.ask}. */
export interface AskOptions {
  /**
   * Milliseconds (of the system clock) to wait for the reply before rejecting with
   * `AskTimeoutError`. Default 5000; `Infinity` waits forever.
   */
  readonly timeoutMs?: number;
}

/**
 * A handle to send messages to one actor (after Pekko's `ActorRef`). It stays valid across
 * restarts of the actor; once the actor has stopped, every call rejects with `ActorStoppedError`.
 *
 * `M` is the message type, `R` the reply type of {@link ActorRef.ask} (the return type of the
 * behaviour's `receive()`).
 */
export interface ActorRef<M, R = void> {
  /** Absolute path, e.g. `/partitions/indexer`. */
  readonly path: string;
  /**
   * Enqueues a message. Resolves once it is in the mailbox, not when it is processed. With a full
   * `'backpressure'` mailbox it waits for space (senders are admitted in FIFO order).
   * @throws (rejects) `ActorStoppedError` if the actor is stopping/stopped (also for senders still
   *   waiting when it stops); `MailboxFullError` with a full `'fail'` mailbox. A full
   *   `'drop-newest'` mailbox drops the message and resolves.
   */
  tell(message: M): Promise<void>;
  /**
   * Enqueues a message and resolves with `receive()`'s return value for it.
   * @throws (rejects) `AskTimeoutError` after `timeoutMs`; the error `receive()` threw;
   *   `ActorStoppedError` if the actor stopped before handling it; `MailboxFullError` with a full
   *   `'fail'` or `'drop-newest'` mailbox.
   */
  ask(message: M, options?: AskOptions): Promise<R>;
  /**
   * Stops the actor for good: lets an in-flight `receive()` settle, stops its children (last
   * started first), runs `stop()`, then drops the rest of the mailbox (pending asks reject with
   * `ActorStoppedError`). Idempotent; resolves when it is stopped.
   */
  stop(): Promise<void>;
}
