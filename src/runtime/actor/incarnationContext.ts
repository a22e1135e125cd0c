import type { Clock } from '../clock.js';
import { ActorStoppedError } from '../../errors.js';
import type { Behavior } from './behavior.js';
import type { ActorCell } from './cell.js';
import type { ActorContext } from './context.js';
import type { ActorRef } from './ref.js';
import type { SpawnOptions } from './spawnOptions.js';
import type { ActorSystem } from './system.js';

/** The {@link ActorContext} of one incarnation of an actor; made by `ActorCell.start()`. */
export class IncarnationContext<M> implements ActorContext<M> {
  readonly signal: AbortSignal;
  readonly fail: (error: unknown) => void;
  readonly #cell: ActorCell<M>;

  constructor(cell: ActorCell<M>, incarnation: number, signal: AbortSignal) {
    this.#cell = cell;
    this.signal = signal;
    this.fail = (error: unknown): void => cell.fail(error, incarnation);
  }

  get self(): ActorRef<M, any> {
    return this.#cell.ref;
  }

  get path(): string {
    return this.#cell.path;
  }

  get system(): ActorSystem {
    return this.#cell.host.system;
  }

  get clock(): Clock {
    return this.#cell.host.clock;
  }

  spawn<C, CS, CR>(name: string, behavior: Behavior<C, CS, CR>, options?: SpawnOptions): ActorRef<C, CR> {
    if (this.signal.aborted) {
      throw new ActorStoppedError(`cannot spawn ${name}: this incarnation of ${this.#cell.path} has ended`);
    }
    return this.#cell.spawnChild(name, behavior, options).ref;
  }
}
