import type { ActorContext } from './context.js';
import type { DetachedReply } from './detachedReply.js';

/**
 * What an actor does, as a plain value (after xstate's `ActorLogic`): the runtime owns the
 * mailbox, the lifecycle and supervision; a behaviour only acquires, handles and releases.
 *
 * Type parameters: `M` the messages it accepts, `S` the state `start()` produces (resources such
 * as an open store or a broker subscription), `R` what `receive()` returns to an `ask`.
 *
 * Lifecycle of one incarnation: `start(ctx)` → `receive(state, m, ctx)` once per message, one at a
 * time, in mailbox order (the next call starts only after the previous one settled, or returned a
 * `DetachedReply`) → `stop(state, ctx)`.
 * A restart ends the incarnation (`stop()`) and begins a new one (`start()`), keeping the mailbox.
 *
 * @example
 * ```ts
 * const counter: Behavior<{ add: number }, { total: number }, number> = {
 *   kind: 'counter',
 *   start: () => ({ total: 0 }),
 *   receive: (state, m) => (state.total += m.add),
 * };
 * const ref = system.spawn('counter', counter);
 * await ref.ask({ add: 2 }); // 2
 * ```
 */
export interface Behavior<M, S = void, R = void> {
  /** Short, stable name of the actor type, e.g. `'indexer'`; shown in `tree()` and lifecycle events. */
  readonly kind: string;
  /**
   * Acquires this incarnation's resources and returns its state. Messages that arrive meanwhile
   * wait in the mailbox. A throw/rejection is a failure handled by the supervisor (a `resume`
   * decision is then treated as `restart`, since there is no state to resume with).
   */
  start(ctx: ActorContext<M>): Promise<S> | S;
  /**
   * Handles one message. The return value (or the promise's value) answers an `ask`. A
   * throw/rejection rejects the `ask`, is not retried, and is reported to the supervisor.
   * A `DetachedReply` (`detachReply(promise)`), returned or as the promise's value, answers the
   * `ask` when its promise settles while the next messages are handled; its rejection rejects
   * the `ask` only.
   */
  receive(state: S, message: M, ctx: ActorContext<M>): Promise<R | DetachedReply<R>> | R | DetachedReply<R>;
  /**
   * Releases what `start()` acquired; runs when the actor stops and before every restart
   * (after its children were stopped and `ctx.signal` was aborted). Errors are logged, not supervised.
   */
  stop?(state: S, ctx: ActorContext<M>): Promise<void> | void;
}
