import { Subject, type Observable } from 'rxjs';
import { systemClock, type Clock } from '../clock.js';
import { renderTree, type LifecycleEvent, type TreeNode } from '../inspection.js';
import type { ChildSpec } from '../supervision/childSpec.js';
import { checkChildSpecs } from '../supervision/internal/checkChildSpecs.js';
import type { SupervisorStrategy } from '../supervision/strategy.js';
import { ActorStoppedError, InvalidArgumentError } from '../../errors.js';
import type { Behavior } from './behavior.js';
import { ActorCell, type CellHost } from './cell.js';
import type { ChaosPolicy } from './chaosPolicy.js';
import { consoleLogger, type Logger } from './logger.js';
import type { ActorRef } from './ref.js';
import type { SpawnOptions } from './spawnOptions.js';

/**
 * An xstate inspection event as xstate's `inspect` observer gives it (xstate's
 * `InspectionEvent`: `@xstate.snapshot`, `@xstate.event`, `@xstate.actor`,
 * `@xstate.microstep`, `@xstate.action`). Declared by its common fields so that shardflow's
 * published types do not load xstate's declarations, which do not compile under a consumer's
 * `exactOptionalPropertyTypes` with `skipLibCheck: false`; narrow on `type` and cast to
 * xstate's type to read the rest.
 */
export interface ActorInspectionEvent {
  readonly type: string;
  /** Session id of the root actor of the lifecycle machine. */
  readonly rootId: string;
  /** xstate's `ActorRef` of the machine. */
  readonly actorRef: unknown;
  /** `@xstate.snapshot`: the machine's snapshot (its `value` and `context`). */
  readonly snapshot?: unknown;
  /** `@xstate.event`, `@xstate.snapshot`: the event. */
  readonly event?: unknown;
}

/** Options of {@link ActorSystem.create}. */
export interface ActorSystemOptions {
  /** Name of the system, for logs (e.g. `'shardflow-demo'`). */
  readonly name: string;
  /** Time source for backoff, ask timeouts and event timestamps. Default {@link systemClock}. */
  readonly clock?: Clock;
  /** Default {@link consoleLogger}; a pino logger fits. */
  readonly logger?: Logger;
  /** Uniform [0, 1) source for backoff jitter of strategies without `withRandom`. Default `Math.random`. */
  readonly random?: () => number;
  /** Observer of xstate inspection events of every actor's lifecycle machine (`@xstate.snapshot`, ...). */
  readonly inspect?: (event: ActorInspectionEvent) => void;
  /** Fault injection before `receive()` (the `--chaos` switch); default none. See {@link ChaosPolicy}. */
  readonly chaos?: ChaosPolicy;
}

/**
 * How a system ended: `terminated` after {@link ActorSystem.terminate}, `failed` when a failure was
 * escalated to the root guardian (`error` is that failure; the `@shardflow.escalated` event names
 * the actor it came from).
 */
export type Termination =
  | { readonly kind: 'terminated' }
  | { readonly kind: 'failed'; readonly error: unknown };

/** Behaviour of the root guardian: no state, ignores messages. */
const GUARDIAN_BEHAVIOR: Behavior<never, undefined, void> = Object.freeze({
  kind: 'guardian',
  start: () => undefined,
  receive: () => undefined,
});

/**
 * A tree of supervised actors with a root guardian at `/` (Pekko `ActorSystem`, xstate's implicit
 * system). Top-level actors are children of the guardian; failures that escalate to the guardian
 * terminate the system.
 *
 * @remarks Every actor runs its lifecycle as an xstate actor (see `lifecycle.ts`), with the
 * runtime's own mailbox in front: xstate inspection (`options.inspect`) and snapshots apply, and the
 * message hot path stays out of xstate.
 *
 * @example
 * ```ts
 * const system = ActorSystem.create({ name: 'demo' });
 * system.events$.subscribe((event) => console.log(event.type, event.path));
 * const partitions = system.supervise('partitions', SupervisorStrategy.oneForOne().withLimit(5, 60_000), [
 *   { name: 'indexer', behavior: indexer },
 *   { name: 'metrics', behavior: metrics, options: { mailbox: { capacity: 1000 } } },
 * ]);
 * const indexerRef = system.lookup<IndexerMessage>('/partitions/indexer')!;
 * await indexerRef.tell({ type: 'fetched', page });
 * console.log(system.renderTree());
 * const how = await system.terminate(); // { kind: 'terminated' }
 * ```
 */
export class ActorSystem {
  /** The system's name. */
  readonly name: string;
  /** The injected clock (also `ctx.clock` of every actor). */
  readonly clock: Clock;
  /** The injected logger. */
  readonly logger: Logger;
  /**
   * Lifecycle events of every actor, hot (no replay). Completes when the system has terminated;
   * an escalation to the root shows as `@shardflow.escalated` followed by the `@shardflow.stopped`
   * events of the shutdown.
   */
  readonly events$: Observable<LifecycleEvent>;
  /** Resolves (never rejects) once every actor has stopped; see {@link Termination}. */
  readonly whenTerminated: Promise<Termination>;

  readonly #events = new Subject<LifecycleEvent>();
  readonly #cells = new Map<string, ActorCell>();
  readonly #root: ActorCell;
  #termination: Termination | undefined;
  #resolveTerminated: (termination: Termination) => void = () => {};

  private constructor(options: ActorSystemOptions) {
    this.name = options.name;
    this.clock = options.clock ?? systemClock;
    this.logger = options.logger ?? consoleLogger;
    this.events$ = this.#events.asObservable();
    this.whenTerminated = new Promise<Termination>((resolve) => {
      this.#resolveTerminated = resolve;
    });
    const events = this.#events;
    const cells = this.#cells;
    const clock = this.clock;
    const host: CellHost = {
      system: this,
      clock,
      logger: this.logger,
      random: options.random ?? Math.random,
      inspect: options.inspect,
      beforeReceive: options.chaos?.injector(),
      emit(type, cell, reason) {
        if (events.closed) return;
        const at = clock.now();
        events.next(
          type === '@shardflow.failed' || type === '@shardflow.escalated'
            ? { type, path: cell.path, kind: cell.kind, reason, at }
            : { type, path: cell.path, kind: cell.kind, at },
        );
      },
      register(cell) {
        cells.set(cell.path, cell);
      },
      unregister(cell) {
        if (cells.get(cell.path) === cell) cells.delete(cell.path);
      },
      guardianFailed: (error) => {
        this.logger.error({ system: this.name, err: error }, 'failure escalated to the root guardian; terminating');
        this.#beginTermination({ kind: 'failed', error });
      },
    };
    this.#root = new ActorCell(host, null, '', { behavior: GUARDIAN_BEHAVIOR }, undefined);
    void this.#root.start();
  }

  /**
   * Creates a running system.
   * @throws `InvalidArgumentError` if `name` is not a non-empty string.
   */
  static create(options: ActorSystemOptions): ActorSystem {
    if (typeof options?.name !== 'string' || options.name.length === 0) {
      throw new InvalidArgumentError('ActorSystem.create needs a non-empty name');
    }
    return new ActorSystem(options);
  }

  /**
   * Starts a top-level actor at `/<name>` under the root guardian. Returns at once; `start()` runs
   * asynchronously and messages sent meanwhile wait in the mailbox. Its failures are handled by
   * `options.supervision ?? SupervisorStrategy.default`.
   * @throws `InvalidArgumentError` for a bad or taken name or bad mailbox options;
   *   `ActorStoppedError` once the system is terminating.
   */
  spawn<M, S, R>(name: string, behavior: Behavior<M, S, R>, options?: SpawnOptions): ActorRef<M, R> {
    this.#checkOpen(name);
    return this.#root.spawnChild(name, behavior, options).ref;
  }

  /**
   * Starts a supervisor actor at `/<name>` (kind `'supervisor'`) whose `children` are created at
   * once (so {@link lookup} finds them) and started one after another in list order, each after the
   * previous `start()` settled (Erlang/OTP). `strategy` governs the children (a child's own
   * `options.supervision` overrides it); `options.supervision` governs the supervisor's own failures,
   * i.e. escalations from its children. Children are restarted in place: their refs stay valid.
   * A child stopped for good (a `stop` directive, `ref.stop()`) stays stopped until the supervisor
   * itself restarts, which creates it anew from its spec (Erlang/OTP permanent children).
   * @returns the supervisor's ref (it accepts no messages; `stop()` stops the whole subtree).
   * @throws `InvalidArgumentError` for invalid specs (checked before anything starts); `ActorStoppedError` once terminating.
   */
  supervise(name: string, strategy: SupervisorStrategy, children: readonly ChildSpec[], options?: Pick<SpawnOptions, 'supervision'>): ActorRef<never> {
    this.#checkOpen(name);
    checkChildSpecs(children, `/${name}`);
    return this.#root.superviseChildren(name, strategy, children, options).ref as ActorRef<never>;
  }

  /**
   * The ref of the live actor at `path` (e.g. `/partitions/indexer`), or `undefined`. The type
   * parameters are the caller's assertion; nothing checks them.
   */
  lookup<M = unknown, R = unknown>(path: string): ActorRef<M, R> | undefined {
    return this.#cells.get(path)?.ref as ActorRef<M, R> | undefined;
  }

  /** A snapshot of the actor tree, starting at the root guardian `/`. */
  tree(): TreeNode {
    return this.#root.snapshot();
  }

  /** {@link tree} as indented text, one line per actor (see `renderTree` in `inspection.ts`). */
  renderTree(): string {
    return renderTree(this.tree());
  }

  /**
   * Stops every actor, children before parents and last started first among siblings, running each
   * `stop()`; then completes `events$`. Idempotent.
   * @returns {@link whenTerminated}.
   */
  terminate(): Promise<Termination> {
    this.#beginTermination({ kind: 'terminated' });
    return this.whenTerminated;
  }

  #checkOpen(name: string): void {
    if (this.#termination !== undefined) throw new ActorStoppedError(`cannot start ${name}: system ${this.name} is terminating`);
  }

  #beginTermination(termination: Termination): void {
    if (this.#termination !== undefined) return;
    this.#termination = termination;
    void this.#root.stop().then(() => {
      this.#events.complete();
      this.#resolveTerminated(termination);
    });
  }
}
