import type { Cancel, Clock } from '../clock.js';
import type { Behavior } from './behavior.js';
import type { ActorRef } from './ref.js';
import type { SpawnOptions } from './spawnOptions.js';
import type { ActorSystem } from './system.js';
import type { Terminated } from './terminated.js';

/**
 * What a behaviour sees of the runtime during one incarnation (after Pekko's `ActorContext`).
 * A new context is made for every incarnation; after the incarnation ends (`signal` aborted),
 * `fail` is ignored and `spawn` throws `ActorStoppedError`.
 */
export interface ActorContext<M> {
  /** This actor's own ref (stable across restarts). */
  readonly self: ActorRef<M, any>;
  /** This actor's path, e.g. `/partitions/indexer`. */
  readonly path: string;
  /** The system this actor belongs to. */
  readonly system: ActorSystem;
  /**
   * Aborted when this incarnation ends: before `stop()` runs on stop and on restart. Pass it to
   * fetches, timers and pipelines so they end with the incarnation.
   */
  readonly signal: AbortSignal;
  /** The system's injected clock: use it instead of `Date.now()` or the global `setTimeout`. */
  readonly clock: Clock;
  /**
   * Reports an asynchronous failure (e.g. an RxJS pipeline's error) to the supervisor, as if
   * `receive()` had thrown it. A bound function: `subscribe({ error: ctx.fail })` works. Ignored
   * after the incarnation ended or when a failure is already being handled.
   */
  readonly fail: (error: unknown) => void;
  /**
   * Starts a child actor named `name` (unique among live siblings, no `/`). Its failures are
   * handled by `options.supervision ?? SupervisorStrategy.default`. Children are stopped before
   * this actor's `stop()` on stop and on restart (a restarted `start()` spawns them again).
   * @throws `InvalidArgumentError` for a bad or taken name; `ActorStoppedError` after the incarnation ended.
   */
  spawn<C, CS, CR>(name: string, behavior: Behavior<C, CS, CR>, options?: SpawnOptions): ActorRef<C, CR>;

  /**
   * Death watch (Pekko `watch`, Erlang `monitor`): when `target` stops for good, calls
   * `notify(terminated)` and, if it returns a message, tells that message to `self`, so the
   * reaction runs inside `receive()` in mailbox order. If `target` has already stopped, the notice
   * comes on the next microtask. The watch ends with this incarnation (or by calling the returned
   * {@link Cancel}); restarts of `target` do not trigger it.
   * @throws `InvalidArgumentError` if `target` is not a ref of this process; `ActorStoppedError` after the incarnation ended.
   */
  watch<T>(target: ActorRef<T, any>, notify: (terminated: Terminated) => M | undefined | void): Cancel;
  /** Death watch delivering the fixed `message` to `self` (Pekko `watchWith`); see {@link watch}. */
  watchWith<T>(target: ActorRef<T, any>, message: M): Cancel;
}
