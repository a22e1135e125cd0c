import { setMaxListeners } from 'node:events';
import { createActor, type Actor } from 'xstate';
import type { Clock } from '../clock.js';
import type { ActorStatus, LifecycleEvent, TreeNode } from '../inspection.js';
import { summarizeError } from '../inspection.js';
import { isSupervisorSpec, type ChildSpec } from '../supervision/childSpec.js';
import { RestartBook } from '../supervision/internal/restartBook.js';
import { superviseFailure } from '../supervision/internal/superviseFailure.js';
import { SupervisorStrategy } from '../supervision/strategy.js';
import { ActorStoppedError, InjectedFaultError, InvalidArgumentError, MailboxFullError } from '../../errors.js';
import type { Behavior } from './behavior.js';
import { checkActorName } from './checkActorName.js';
import { createMailbox } from './createMailbox.js';
import { DetachedReply } from './detachedReply.js';
import { IncarnationContext } from './incarnationContext.js';
import { lifecycleLogic, type LifecycleCommand } from './lifecycle.js';
import { LocalActorRef } from './localActorRef.js';
import type { Logger } from './logger.js';
import type { Mailbox } from './mailbox.js';
import type { AskOptions } from './ref.js';
import { Reply } from './reply.js';
import type { SpawnOptions } from './spawnOptions.js';
import type { ActorInspectionEvent, ActorSystem } from './system.js';
import type { Terminated } from './terminated.js';

/**
 * What a cell needs from its system; implemented privately by `ActorSystem` so cells never touch
 * the system's internals and there is no module-level state.
 */
export interface CellHost {
  readonly system: ActorSystem;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Default jitter source for strategies without `withRandom`. */
  readonly random: () => number;
  /** xstate inspection observer passed to every lifecycle actor. */
  readonly inspect: ((event: ActorInspectionEvent) => void) | undefined;
  /**
   * Called before each `receive()`; throwing makes that message fail as if `receive()` had thrown
   * (chaos injection). `undefined` keeps the hot path free of the call.
   */
  readonly beforeReceive: ((path: string, kind: string) => void) | undefined;
  /** Publishes a lifecycle event for `cell`. */
  emit(type: LifecycleEvent['type'], cell: ActorCell, reason?: unknown): void;
  /** A cell was created / stopped for good (path registry for `lookup`). */
  register(cell: ActorCell): void;
  unregister(cell: ActorCell): void;
  /** A failure reached the root guardian: the system terminates with it. */
  guardianFailed(error: unknown): void;
}

/** What a cell runs: a behaviour, or the built-in supervisor over child specs. */
export type CellSource<M, S, R> =
  | { readonly behavior: Behavior<M, S, R> }
  | { readonly strategy: SupervisorStrategy; readonly specs: readonly ChildSpec[] };

/** Drain-loop states. */
const IDLE = 0;
const SCHEDULED = 1;
const DRAINING = 2;
const AWAITING = 3;

/** Messages handled synchronously in one drain turn before yielding to the event loop (setImmediate). */
const DRAIN_BUDGET = 1024;
/** `ask` timeout when none is given, in ms. */
const DEFAULT_ASK_TIMEOUT_MS = 5000;
/**
 * Shared result of a `tell` that went straight into the mailbox: no per-message allocation. Also
 * the scheduler of drains: `ENQUEUED.then(drain)` is a plain V8 microtask, measured 1.6x cheaper
 * than Node's `queueMicrotask` (which wraps the callback for async_hooks); it runs once per idle →
 * scheduled transition, i.e. once per batch, not per message.
 */
const ENQUEUED: Promise<void> = Promise.resolve();

const noop = (): void => {};

/** Behaviour of supervisor cells: their work is done by the cell (children); messages are ignored. */
const SUPERVISOR_BEHAVIOR: Behavior<never, undefined, void> = Object.freeze({
  kind: 'supervisor',
  start: () => undefined,
  receive: () => undefined,
});

/**
 * The runtime of one actor (Pekko's `ActorCell`, xstate's `Actor`): mailbox, drain loop,
 * incarnations, lifecycle machine, children, and the supervision queue for its children's failures.
 * Internal: users see only {@link LocalActorRef} and `ActorContext`.
 *
 * Concurrency rules:
 * - Messages: one `receive()` at a time. The drain loop runs synchronous `receive()`s back to back
 *   (up to {@link DRAIN_BUDGET} per turn) and awaits only when one returns a promise.
 * - Supervision: failures of children, and a supervisor's starting of its children, run one at a
 *   time on `#supervision` (a promise chain), so two decisions never interleave. Each task carries
 *   the parent's incarnation signal and gives up once it is aborted (the parent is being torn down).
 * - Teardowns of one cell are serialised on `#teardownChain`, so `stop()` during a restart is safe.
 */
export class ActorCell<M = any, S = any, R = any> {
  readonly host: CellHost;
  readonly parent: ActorCell | null;
  readonly name: string;
  readonly path: string;
  readonly kind: string;
  readonly ref: LocalActorRef<M, R>;
  /** Strategy that decides this cell's failures. */
  readonly strategy: SupervisorStrategy;
  /** For supervisor cells: the default strategy of their children. */
  readonly supervisorStrategy: SupervisorStrategy | undefined;
  /** Restart bookkeeping when this cell's strategy is one-for-one. */
  readonly restartBook = new RestartBook();
  /** Restart bookkeeping of this cell's children under one-for-all / rest-for-one. */
  readonly groupBook = new RestartBook();
  /** Live children by name, in start order. */
  readonly children = new Map<string, ActorCell>();

  readonly #behavior: Behavior<M, S, R>;
  readonly #specs: readonly ChildSpec[] | undefined;
  readonly #mailbox: Mailbox<M, R>;
  readonly #lifecycle: Actor<typeof lifecycleLogic>;
  #status: ActorStatus = 'starting';
  #state: S | undefined;
  /** `start()` succeeded and `stop()` has not run yet for this incarnation. */
  #live = false;
  #incarnation = 0;
  #abort = listenedAbortController();
  #ctx: IncarnationContext<M>;
  #processed = 0;
  #dropped = 0;
  #loop = IDLE;
  #inFlight: PromiseLike<R | DetachedReply<R>> | undefined;
  #inFlightReply: Reply<R> | undefined;
  #startPromise: Promise<void> | undefined;
  #teardownChain: Promise<void> = ENQUEUED;
  #supervision: Promise<void> = ENQUEUED;
  #backoffLeave: (() => void) | undefined;
  #closed = false;
  #stopPromise: Promise<void> | undefined;
  #stopReason: unknown;
  #watchers: Set<(terminated: Terminated) => void> | undefined;

  constructor(host: CellHost, parent: ActorCell | null, name: string, source: CellSource<M, S, R>, options: SpawnOptions | undefined) {
    this.host = host;
    this.parent = parent;
    this.name = name;
    this.path = parent === null ? '/' : parent.path === '/' ? `/${name}` : `${parent.path}/${name}`;
    if ('behavior' in source) {
      this.#behavior = source.behavior;
      this.#specs = undefined;
      this.supervisorStrategy = undefined;
    } else {
      this.#behavior = SUPERVISOR_BEHAVIOR as unknown as Behavior<M, S, R>;
      this.#specs = source.specs;
      this.supervisorStrategy = source.strategy;
    }
    this.kind = this.#behavior.kind;
    this.strategy = options?.supervision ?? parent?.supervisorStrategy ?? SupervisorStrategy.default;
    this.#mailbox = createMailbox<M, R>(options?.mailbox);
    this.ref = new LocalActorRef<M, R>(this);
    this.#ctx = new IncarnationContext<M>(this, 0, this.#abort.signal);
    this.#lifecycle = createActor(lifecycleLogic, {
      input: { kind: this.kind, path: this.path },
      ...(host.inspect === undefined ? {} : { inspect: host.inspect }),
    });
    this.#lifecycle.start();
    if (this.#specs !== undefined) for (const spec of this.#specs) this.#createChild(spec);
  }

  // ---- inspection -------------------------------------------------------------------------

  get status(): ActorStatus {
    return this.#status;
  }

  get incarnation(): number {
    return this.#incarnation;
  }

  /** True when the current incarnation holds state from a successful `start()`. */
  get live(): boolean {
    return this.#live;
  }

  /** Snapshot of this cell and its subtree. */
  snapshot(): TreeNode {
    const { context } = this.#lifecycle.getSnapshot();
    const node: TreeNode = {
      path: this.path,
      kind: this.kind,
      status: this.#status,
      mailboxDepth: this.#mailbox.size,
      processed: this.#processed,
      dropped: this.#dropped,
      restarts: context.restarts,
      ...(context.lastError === undefined ? {} : { lastError: summarizeError(context.lastError) }),
      children: this.orderedChildren().map((child) => child.snapshot()),
    };
    return node;
  }

  /** Live children in start order (spec order for supervisors). */
  orderedChildren(): ActorCell[] {
    const children = [...this.children.values()];
    const specs = this.#specs;
    if (specs === undefined) return children;
    const rank = (cell: ActorCell): number => specs.findIndex((spec) => spec.name === cell.name);
    return children.sort((a, b) => rank(a) - rank(b));
  }

  // ---- messages (hot path) ----------------------------------------------------------------

  /** See `ActorRef.tell`. */
  tell(message: M): Promise<void> {
    return this.#offer(message, undefined);
  }

  /** See `ActorRef.ask`. */
  ask(message: M, options?: AskOptions): Promise<R> {
    const timeoutMs = options?.timeoutMs ?? DEFAULT_ASK_TIMEOUT_MS;
    if (!(timeoutMs > 0)) return Promise.reject(new InvalidArgumentError(`ask timeoutMs must be > 0, got ${timeoutMs}`));
    return new Promise<R>((resolve, reject) => {
      const reply = new Reply<R>(resolve, reject);
      reply.arm(this.host.clock, timeoutMs, this.path);
      this.#offer(message, reply).then(undefined, (error: unknown) => reply.reject(error));
    });
  }

  #offer(message: M, reply: Reply<R> | undefined): Promise<void> {
    if (this.#closed) return Promise.reject(new ActorStoppedError(`actor ${this.path} is stopped`));
    const mailbox = this.#mailbox;
    if (mailbox.hasRoom) {
      mailbox.push(message, reply);
      if (this.#loop === IDLE && this.#status === 'running') {
        this.#loop = SCHEDULED;
        void ENQUEUED.then(this.#drain);
      }
      return ENQUEUED;
    }
    switch (mailbox.overflow) {
      case 'backpressure':
        return mailbox.park(message, reply);
      case 'drop-newest':
        this.#dropped++;
        reply?.reject(new MailboxFullError(`mailbox of ${this.path} is full (${mailbox.capacity}); message dropped`));
        return ENQUEUED;
      default:
        return Promise.reject(new MailboxFullError(`mailbox of ${this.path} is full (${mailbox.capacity})`));
    }
  }

  #schedule(): void {
    if (this.#loop === IDLE && this.#status === 'running' && this.#mailbox.size > 0) {
      this.#loop = SCHEDULED;
      void ENQUEUED.then(this.#drain);
    }
  }

  /** Processes queued messages while running; see the class comment. */
  readonly #drain = (): void => {
    this.#loop = DRAINING;
    const mailbox = this.#mailbox;
    const behavior = this.#behavior;
    const beforeReceive = this.host.beforeReceive;
    let budget = DRAIN_BUDGET;
    while (this.#status === 'running' && mailbox.size > 0) {
      if (budget-- === 0) {
        this.#loop = SCHEDULED;
        setImmediate(this.#drain);
        return;
      }
      const message = mailbox.peekMessage();
      const reply = mailbox.peekReply();
      mailbox.shift();
      let result: R | Promise<R | DetachedReply<R>> | DetachedReply<R>;
      try {
        if (beforeReceive !== undefined) beforeReceive(this.path, this.kind);
        result = behavior.receive(this.#state as S, message, this.#ctx);
      } catch (error) {
        this.#loop = IDLE;
        reply?.reject(error);
        this.fail(error, this.#incarnation);
        return;
      }
      if (result instanceof DetachedReply) {
        // Handled now; its answer reaches the asker when it settles (a rejection is the
        // asker's alone, not a failure of this actor).
        this.#processed++;
        this.restartBook.handled();
        this.#answerLater(result as DetachedReply<R>, reply);
        continue;
      }
      if (result !== null && typeof result === 'object' && typeof (result as PromiseLike<R>).then === 'function') {
        this.#loop = AWAITING;
        this.#inFlight = result as PromiseLike<R | DetachedReply<R>>;
        this.#inFlightReply = reply;
        (result as PromiseLike<R | DetachedReply<R>>).then(this.#settledOk, this.#settledError);
        return;
      }
      this.#processed++;
      this.restartBook.handled();
      reply?.resolve(result as R);
    }
    this.#loop = IDLE;
  };

  readonly #settledOk = (value: R | DetachedReply<R>): void => {
    const reply = this.#inFlightReply;
    this.#inFlight = undefined;
    this.#inFlightReply = undefined;
    this.#processed++;
    this.restartBook.handled();
    if (value instanceof DetachedReply) this.#answerLater(value as DetachedReply<R>, reply);
    else reply?.resolve(value);
    this.#loop = IDLE;
    if (this.#status === 'running' && this.#mailbox.size > 0) this.#drain();
  };

  /** Answers `reply` when a detached answer settles (its rejection is the asker's alone; a tell's is dropped). */
  #answerLater(detached: DetachedReply<R>, reply: Reply<R> | undefined): void {
    if (reply !== undefined) detached.answer.then((v) => reply.resolve(v), (e: unknown) => reply.reject(e));
    else detached.answer.catch(() => {});
  }

  readonly #settledError = (error: unknown): void => {
    const reply = this.#inFlightReply;
    this.#inFlight = undefined;
    this.#inFlightReply = undefined;
    this.#loop = IDLE;
    reply?.reject(error);
    this.fail(error, this.#incarnation);
  };

  // ---- lifecycle ---------------------------------------------------------------------------

  #send(command: LifecycleCommand): void {
    this.#lifecycle.send(command);
    this.#status = this.#lifecycle.getSnapshot().value as ActorStatus;
  }

  /**
   * Reports a failure of `incarnation` to the supervisor (or, for the root guardian, terminates the
   * system). Ignored for an ended incarnation, while not starting/running/restarting, or when stopping.
   */
  fail(error: unknown, incarnation: number): void {
    const status = this.#status;
    if (
      incarnation !== this.#incarnation ||
      this.#abort.signal.aborted ||
      this.#closed ||
      (status !== 'running' && status !== 'starting' && status !== 'restarting')
    ) {
      this.host.logger.debug({ path: this.path, status, err: error }, 'failure report ignored (incarnation ended or failure already handled)');
      return;
    }
    this.#send({ type: 'shardflow.failed', error });
    this.host.emit('@shardflow.failed', this, error);
    // Every real failure is logged where it happened, as Akka logs each failure its supervisor
    // handles; a fault that chaos testing injected on purpose only at debug level.
    if (error instanceof InjectedFaultError) this.host.logger.debug({ path: this.path, err: error }, 'injected fault; the supervisor decides');
    else this.host.logger.warn({ path: this.path, err: error }, 'actor failed; its supervisor decides (restart, stop or escalate)');
    if (this.parent === null) this.host.guardianFailed(error);
    else this.parent.superviseChild(this, error, incarnation);
  }

  /** Fails this cell with `error` on behalf of a child that escalated. */
  escalate(error: unknown): void {
    this.fail(error, this.#incarnation);
  }

  /** Queues the handling of `child`'s failure on this cell's supervision chain. */
  superviseChild(child: ActorCell, error: unknown, incarnation: number): void {
    const signal = this.#abort.signal;
    void this.enqueueSupervision(() => superviseFailure(this, child, error, incarnation, signal));
  }

  /** Runs `task` after every supervision task queued before it; resolves when it is done (never rejects). */
  enqueueSupervision<T>(task: () => Promise<T>): Promise<T | undefined> {
    const run = this.#supervision.then(task).catch((error: unknown) => {
      this.host.logger.error({ path: this.path, err: error }, 'supervision task failed');
      return undefined;
    });
    this.#supervision = run.then(noop);
    return run;
  }

  /**
   * Starts a new incarnation: `start()` of the behaviour (for a supervisor: its children, in order).
   * Success makes the cell `running` (event `started`, or `restarted` after a restart); failure is
   * reported to the supervisor. Never rejects.
   */
  start(): Promise<void> {
    const run = this.#runStart();
    this.#startPromise = run;
    return run;
  }

  async #runStart(): Promise<void> {
    if (this.#closed) return;
    const restart = this.#status !== 'starting';
    if (this.#status === 'backoff') {
      this.#backoffLeave = undefined;
      this.#send({ type: 'shardflow.restarting' });
    }
    const incarnation = ++this.#incarnation;
    const abort = (this.#abort = listenedAbortController());
    const ctx = (this.#ctx = new IncarnationContext<M>(this, incarnation, abort.signal));
    let state: S;
    try {
      if (this.#specs !== undefined) {
        await this.enqueueSupervision(() => this.#startChildren(abort.signal));
        state = undefined as S;
      } else {
        state = await this.#behavior.start(ctx);
      }
    } catch (error) {
      if (abort.signal.aborted) {
        this.host.logger.debug({ path: this.path, err: error }, 'start() failed after the incarnation ended');
        return;
      }
      this.fail(error, incarnation);
      return;
    }
    this.#state = state;
    this.#live = true;
    if (abort.signal.aborted) return; // stopping or restarting: the teardown runs stop()
    this.#send({ type: 'shardflow.started' });
    this.host.emit(restart ? '@shardflow.restarted' : '@shardflow.started', this);
    this.#schedule();
  }

  async #startChildren(signal: AbortSignal): Promise<void> {
    for (const spec of this.#specs ?? []) {
      if (signal.aborted) return;
      const child = this.children.get(spec.name) ?? this.#createChild(spec);
      const status = child.status;
      if (status === 'starting' || status === 'restarting' || status === 'backoff') await child.start();
    }
  }

  #createChild(spec: ChildSpec): ActorCell {
    checkActorName(spec.name);
    if (this.children.has(spec.name)) throw new InvalidArgumentError(`duplicate child name ${JSON.stringify(spec.name)} under ${this.path}`);
    const child = isSupervisorSpec(spec)
      ? new ActorCell(this.host, this, spec.name, { strategy: spec.strategy, specs: spec.children }, spec.options)
      : new ActorCell(this.host, this, spec.name, { behavior: spec.behavior }, spec.options);
    this.children.set(spec.name, child);
    this.host.register(child);
    return child;
  }

  /**
   * Creates and starts a child running `behavior` (`ctx.spawn`, `system.spawn`).
   * @throws `InvalidArgumentError` for a bad or taken name or bad options; `ActorStoppedError` if stopping.
   */
  spawnChild<C, CS, CR>(name: string, behavior: Behavior<C, CS, CR>, options: SpawnOptions | undefined): ActorCell<C, CS, CR> {
    if (this.#closed) throw new ActorStoppedError(`cannot spawn ${name}: ${this.path} is stopping`);
    checkActorName(name);
    if (this.children.has(name)) throw new InvalidArgumentError(`an actor named ${JSON.stringify(name)} already exists under ${this.path}`);
    const child = new ActorCell<C, CS, CR>(this.host, this, name, { behavior }, options);
    this.children.set(name, child);
    this.host.register(child);
    void child.start();
    return child;
  }

  /** Creates and starts a supervisor child over `specs` (`system.supervise`). */
  superviseChildren(name: string, strategy: SupervisorStrategy, specs: readonly ChildSpec[], options: SpawnOptions | undefined): ActorCell {
    if (this.#closed) throw new ActorStoppedError(`cannot start ${name}: ${this.path} is stopping`);
    const child = this.#createChild({ name, strategy, children: specs, ...(options === undefined ? {} : { options }) });
    void child.start();
    return child;
  }

  /** `failed` → `running`, keeping state; suspended (escalated) children are resumed too. */
  resume(): void {
    if (this.#status !== 'failed') return;
    this.#send({ type: 'shardflow.resumed' });
    this.#schedule();
    for (const child of this.children.values()) {
      if (child.status !== 'failed') continue;
      if (child.live) child.resume();
      else {
        void this.enqueueSupervision(async () => {
          if (child.status === 'failed' && child.markRestarting()) {
            await child.teardown('restart');
            await child.start();
          }
        });
      }
    }
  }

  /** Moves to `restarting` ahead of a teardown; false if the cell is stopping or stopped. */
  markRestarting(): boolean {
    switch (this.#status) {
      case 'running':
      case 'failed':
      case 'starting':
      case 'backoff':
        this.#send({ type: 'shardflow.restarting' });
        return true;
      case 'restarting':
        return true;
      default:
        return false;
    }
  }

  /** `restarting` → `backoff` for `delayMs`; `leave` is called if the cell leaves backoff other than by `start()`. */
  enterBackoff(delayMs: number, leave: () => void): void {
    this.#send({ type: 'shardflow.backoff', delayMs });
    this.#backoffLeave = leave;
  }

  /**
   * Ends the current incarnation: aborts `ctx.signal`, waits for a `start()` or `receive()` in
   * progress, stops children (for `'restart'` of a supervisor: tears them down in place so they are
   * restarted with it; otherwise stops them for good, last started first), then runs `stop()`.
   * Errors from `stop()` are logged. Never rejects.
   */
  teardown(mode: 'restart' | 'stop'): Promise<void> {
    const run = this.#teardownChain.then(() => this.#runTeardown(mode));
    this.#teardownChain = run;
    return run;
  }

  async #runTeardown(mode: 'restart' | 'stop'): Promise<void> {
    this.#abort.abort(new ActorStoppedError(`incarnation of ${this.path} ended`));
    const leave = this.#backoffLeave;
    this.#backoffLeave = undefined;
    leave?.();
    if (this.#startPromise !== undefined) await this.#startPromise;
    if (this.#inFlight !== undefined) await Promise.resolve(this.#inFlight).then(noop, noop);
    const children = this.orderedChildren().reverse();
    for (const child of children) {
      if (mode === 'restart' && this.#specs !== undefined) {
        if (child.markRestarting()) await child.teardown('restart');
      } else {
        await child.stop();
      }
    }
    if (this.#live) {
      this.#live = false;
      const state = this.#state as S;
      this.#state = undefined;
      try {
        await this.#behavior.stop?.(state, this.#ctx);
      } catch (error) {
        this.host.logger.warn({ path: this.path, err: error }, 'stop() failed; resources may leak');
      }
    }
  }

  /**
   * See `ActorRef.stop`. Idempotent. `reason` (a failure, when a supervisor stops the actor) is
   * passed to death watchers as `Terminated.reason`.
   */
  stop(reason?: unknown): Promise<void> {
    if (this.#stopPromise === undefined) {
      this.#stopReason = reason;
      this.#stopPromise = this.#runStop();
    }
    return this.#stopPromise;
  }

  /**
   * Registers a death-watch callback, called once when this cell has stopped (on the next
   * microtask if it already has). @returns a function that removes it.
   */
  addWatcher(callback: (terminated: Terminated) => void): () => void {
    if (this.#status === 'stopped') {
      const terminated: Terminated = { type: '@shardflow.terminated', path: this.path, reason: this.#stopReason };
      let cancelled = false;
      queueMicrotask(() => {
        if (!cancelled) callback(terminated);
      });
      return () => {
        cancelled = true;
      };
    }
    const watchers = (this.#watchers ??= new Set());
    watchers.add(callback);
    return () => {
      watchers.delete(callback);
    };
  }

  async #runStop(): Promise<void> {
    this.#closed = true;
    this.#send({ type: 'shardflow.stopping' });
    await this.teardown('stop');
    const dropped = this.#mailbox.close(new ActorStoppedError(`actor ${this.path} stopped before handling the message`));
    if (dropped > 0) this.host.logger.debug({ path: this.path, dropped }, 'mailbox dropped on stop');
    this.#send({ type: 'shardflow.stopped' });
    this.host.emit('@shardflow.stopped', this);
    const watchers = this.#watchers;
    this.#watchers = undefined;
    if (watchers !== undefined) {
      const terminated: Terminated = { type: '@shardflow.terminated', path: this.path, reason: this.#stopReason };
      for (const watcher of watchers) {
        try {
          watcher(terminated);
        } catch (error) {
          this.host.logger.error({ path: this.path, err: error }, 'death-watch callback threw');
        }
      }
    }
    if (this.parent !== null && this.parent.children.get(this.name) === this) this.parent.children.delete(this.name);
    this.host.unregister(this);
    this.#lifecycle.stop();
  }
}

/**
 * An incarnation's abort controller. Its signal has one listener per child in backoff, per
 * death watch and per pending task, so a supervisor of 16 partitions that all fail at once
 * has more than Node's default of 10: no leak, so no MaxListenersExceededWarning.
 */
function listenedAbortController(): AbortController {
  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  return controller;
}
