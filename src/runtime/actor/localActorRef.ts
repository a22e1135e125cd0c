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

  /** The cell behind `ref` if it is a ref of this runtime, else `undefined` (brand check, no registry). */
  static cellOf(ref: unknown): ActorCell | undefined {
    return typeof ref === 'object' && ref !== null && #cell in ref ? (ref as LocalActorRef<unknown, unknown>).#cell : undefined;
  }

  toString(): string {
    return `ActorRef(${this.#cell.path})`;
  }
}
