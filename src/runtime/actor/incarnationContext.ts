import type { Cancel, Clock } from '../clock.js';
import { ActorStoppedError, InvalidArgumentError } from '../../errors.js';
import type { Behavior } from './behavior.js';
import type { ActorCell } from './cell.js';
import type { ActorContext } from './context.js';
import type { ActorRef } from './ref.js';
import type { SpawnOptions } from './spawnOptions.js';
import { LocalActorRef } from './localActorRef.js';
import type { ActorSystem } from './system.js';
import type { Terminated } from './terminated.js';

/** The {@link ActorContext} of one incarnation of an actor; made by `ActorCell.start()`. */
export class IncarnationContext<M> implements ActorContext<M> {
  readonly signal: AbortSignal;
  readonly fail: (error: unknown) => void;
  readonly #cell: ActorCell<M>;
  readonly #incarnation: number;

  constructor(cell: ActorCell<M>, incarnation: number, signal: AbortSignal) {
    this.#cell = cell;
    this.#incarnation = incarnation;
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

  watch<T>(target: ActorRef<T, any>, notify: (terminated: Terminated) => M | undefined | void): Cancel {
    const targetCell = LocalActorRef.cellOf(target);
    if (targetCell === undefined) throw new InvalidArgumentError(`cannot watch ${String(target)}: not a local actor ref`);
    if (this.signal.aborted) throw new ActorStoppedError(`cannot watch: this incarnation of ${this.#cell.path} has ended`);
    const self = this.#cell;
    let active = true;
    const unwatch = targetCell.addWatcher((terminated) => {
      if (!active) return;
      active = false;
      this.signal.removeEventListener('abort', cancel);
      let message: M | undefined | void;
      try {
        message = notify(terminated);
      } catch (error) {
        self.fail(error, this.#incarnation);
        return;
      }
      if (message !== undefined) {
        self.tell(message as M).catch((error: unknown) => {
          self.host.logger.debug({ path: self.path, err: error }, 'Terminated notice not delivered: watcher is stopped');
        });
      }
    });
    const cancel = (): void => {
      if (!active) return;
      active = false;
      unwatch();
      this.signal.removeEventListener('abort', cancel);
    };
    this.signal.addEventListener('abort', cancel, { once: true });
    return cancel;
  }

  watchWith<T>(target: ActorRef<T, any>, message: M): Cancel {
    return this.watch(target, () => message);
  }
}
