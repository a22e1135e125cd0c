import { assign, setup } from 'xstate';

/**
 * Commands the runtime sends to an actor's lifecycle machine; namespaced `shardflow.` like
 * xstate's internal `xstate.` events.
 */
export type LifecycleCommand =
  | { readonly type: 'shardflow.started' }
  | { readonly type: 'shardflow.failed'; readonly error: unknown }
  | { readonly type: 'shardflow.resumed' }
  | { readonly type: 'shardflow.restarting' }
  | { readonly type: 'shardflow.backoff'; readonly delayMs: number }
  | { readonly type: 'shardflow.stopping' }
  | { readonly type: 'shardflow.stopped' };

/** Context of the lifecycle machine: the rarely changing facts about an actor. */
export interface LifecycleContext {
  /** Behaviour kind (for inspection tools that only see xstate snapshots). */
  readonly kind: string;
  /** Actor path. */
  readonly path: string;
  /** Completed restarts. */
  readonly restarts: number;
  /** Last failure (`undefined` until the first). */
  readonly lastError: unknown;
  /** Delay of the current/last backoff in ms (0 when none). */
  readonly backoffMs: number;
}

/**
 * The lifecycle of one actor as an xstate v5 machine. Every actor runs one of these as an xstate
 * actor (`createActor(lifecycleLogic, { input, inspect })`), so xstate's snapshot
 * (`getSnapshot().value` is the {@link ActorStatus}), persistence and inspection apply; the
 * runtime's own mailbox and drain loop sit in front of it and send it only lifecycle commands,
 * never per-message events (that keeps the hot path out of xstate).
 *
 * Commands not accepted in the current state are ignored by xstate; the runtime only sends the
 * ones listed here (see `ActorStatus` in `inspection.ts` for the diagram).
 */
export const lifecycleLogic = setup({
  types: {
    context: {} as LifecycleContext,
    events: {} as LifecycleCommand,
    input: {} as { readonly kind: string; readonly path: string },
  },
  actions: {
    recordFailure: assign({
      lastError: ({ event }) => (event.type === 'shardflow.failed' ? event.error : undefined),
    }),
    countRestart: assign({ restarts: ({ context }) => context.restarts + 1 }),
    recordBackoff: assign({
      backoffMs: ({ event }) => (event.type === 'shardflow.backoff' ? event.delayMs : 0),
    }),
  },
}).createMachine({
  id: 'shardflow.actor',
  initial: 'starting',
  context: ({ input }) => ({ kind: input.kind, path: input.path, restarts: 0, lastError: undefined, backoffMs: 0 }),
  states: {
    starting: {
      on: {
        'shardflow.started': 'running',
        'shardflow.failed': { target: 'failed', actions: 'recordFailure' },
        'shardflow.restarting': 'restarting',
        'shardflow.stopping': 'stopping',
      },
    },
    running: {
      on: {
        'shardflow.failed': { target: 'failed', actions: 'recordFailure' },
        'shardflow.restarting': 'restarting',
        'shardflow.stopping': 'stopping',
      },
    },
    failed: {
      on: {
        'shardflow.resumed': 'running',
        'shardflow.restarting': 'restarting',
        'shardflow.stopping': 'stopping',
      },
    },
    restarting: {
      on: {
        'shardflow.started': { target: 'running', actions: 'countRestart' },
        'shardflow.failed': { target: 'failed', actions: 'recordFailure' },
        'shardflow.backoff': { target: 'backoff', actions: 'recordBackoff' },
        'shardflow.stopping': 'stopping',
      },
    },
    backoff: {
      on: {
        'shardflow.restarting': 'restarting',
        'shardflow.stopping': 'stopping',
      },
    },
    stopping: {
      on: { 'shardflow.stopped': 'stopped' },
    },
    stopped: { type: 'final' },
  },
});
