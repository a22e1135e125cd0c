import type { ActorCell } from './cell.js';
import type { ActorRef, AskOptions } from './ref.js';

/**
 * The {@link ActorRef} of an actor in this process: a thin, allocation-free forwarder to its cell.
 * One per actor, made with the cell, valid across restarts.
 */
export class LocalActorRef<M, R> implements ActorRef<M, R> {
  readonly #cell: ActorCell<M, any, R>;

  constructor(cell: ActorCell<M, any, R>) {
    this.#cell = cell;
  }

  get path(): string {
    return this.#cell.path;
  }

  tell(message: M): Promise<void> {
    return this.#cell.tell(message);
  }

  ask(message: M, options?: AskOptions): Promise<R> {
    return this.#cell.ask(message, options);
  }

  stop(): Promise<void> {
    return this.#cell.stop();
  }

  toString(): string {
    return `ActorRef(${this.#cell.path})`;
  }
}
