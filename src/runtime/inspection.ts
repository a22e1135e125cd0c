/**
 * What the actor runtime tells the outside world (after xstate's `inspection.ts`): one
 * discriminated union of `@shardflow.`-prefixed lifecycle events, streamed by
 * `ActorSystem.events$`, and a point-in-time {@link TreeNode} snapshot from `ActorSystem.tree()`.
 * The live supervision view (CLI, inspection endpoint) reads only these.
 */

/**
 * Where an actor is in its life. Transitions (driven by the xstate lifecycle machine in
 * `actor/lifecycle.ts`):
 *
 * ```
 * starting ─► running ─► failed ─► (resume) running
 *                │          ├──► restarting ─► backoff ─► restarting ─► running
 *                │          └──► stopping ─► stopped
 *                └──► restarting (a sibling failed under one-for-all / rest-for-one)
 * any non-final state ─► stopping ─► stopped
 * ```
 * - `starting`: first `start()` in progress; messages queue.
 * - `running`: processing its mailbox.
 * - `failed`: suspended after a failure, waiting for (or escalated past) its supervisor's decision.
 * - `restarting`: old incarnation being torn down (`stop()`), or new `start()` in progress.
 * - `backoff`: waiting out a restart delay; messages stay in the mailbox.
 * - `stopping` / `stopped`: permanently shutting down / gone.
 */
export type ActorStatus = 'starting' | 'running' | 'restarting' | 'backoff' | 'stopping' | 'stopped' | 'failed';

/** A JSON-safe summary of an error: its `name`, `message` and shardflow `code` when it has one. */
export interface ErrorSummary {
  readonly name: string;
  readonly message: string;
  readonly code?: string;
}

/** Fields every lifecycle event carries. */
interface LifecycleEventBase {
  /** Actor path, e.g. `/partitions/p-7/indexer`. The root guardian is `/`. */
  readonly path: string;
  /** The behaviour's `kind` (`'supervisor'` for supervisors, `'guardian'` for the root). */
  readonly kind: string;
  /** Clock time of the event, in milliseconds of the system's injected clock. */
  readonly at: number;
}

/** The actor's `start()` succeeded for the first time. */
export interface StartedEvent extends LifecycleEventBase {
  readonly type: '@shardflow.started';
}
/** The actor stopped for good (by `stop()`, a `stop` directive or system termination). */
export interface StoppedEvent extends LifecycleEventBase {
  readonly type: '@shardflow.stopped';
}
/** `receive()`/`start()` threw or rejected, or `ctx.fail()` was called; `reason` is the error. */
export interface FailedEvent extends LifecycleEventBase {
  readonly type: '@shardflow.failed';
  readonly reason: unknown;
}
/** A new incarnation's `start()` succeeded after a restart. */
export interface RestartedEvent extends LifecycleEventBase {
  readonly type: '@shardflow.restarted';
}
/**
 * The failure of `path` was passed up to its parent (an `escalate` directive or an exceeded
 * restart limit); `reason` is the error the parent now fails with. When the parent is the root
 * guardian the system terminates.
 */
export interface EscalatedEvent extends LifecycleEventBase {
  readonly type: '@shardflow.escalated';
  readonly reason: unknown;
}

/** Every lifecycle event, discriminated on `type`. */
export type LifecycleEvent = StartedEvent | StoppedEvent | FailedEvent | RestartedEvent | EscalatedEvent;

/** One actor in a {@link TreeNode} snapshot from `ActorSystem.tree()`. */
export interface TreeNode {
  readonly path: string;
  readonly kind: string;
  readonly status: ActorStatus;
  /** Messages waiting in the mailbox (not counting senders blocked by backpressure). */
  readonly mailboxDepth: number;
  /** Messages whose `receive()` completed successfully, over all incarnations. */
  readonly processed: number;
  /** Messages dropped by a `'drop-newest'` mailbox. */
  readonly dropped: number;
  /** Completed restarts (new incarnations started), over the actor's life. */
  readonly restarts: number;
  /** The most recent failure, if any. */
  readonly lastError?: ErrorSummary;
  /** Children in start order. */
  readonly children: readonly TreeNode[];
}

/** Summarises any thrown value as an {@link ErrorSummary} (non-errors become `{ name: 'NonError' }`). */
export function summarizeError(error: unknown): ErrorSummary {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string'
      ? { name: error.name, message: error.message, code }
      : { name: error.name, message: error.message };
  }
  return { name: 'NonError', message: String(error) };
}

/**
 * Renders a tree snapshot as indented text, one line per actor, two spaces per level:
 *
 * ```
 * / [guardian] running processed=0 restarts=0 mailbox=0
 *   partitions [supervisor] running processed=0 restarts=1 mailbox=0
 *     indexer [indexer] backoff processed=42 restarts=3 mailbox=7 lastError=SF_ERR_BROKER_DISCONNECTED: broker disconnected
 * ```
 */
export function renderTree(root: TreeNode): string {
  const lines: string[] = [];
  const visit = (node: TreeNode, depth: number): void => {
    const name = depth === 0 ? node.path : node.path.slice(node.path.lastIndexOf('/') + 1);
    let line = `${'  '.repeat(depth)}${name} [${node.kind}] ${node.status} processed=${node.processed} restarts=${node.restarts} mailbox=${node.mailboxDepth}`;
    if (node.dropped > 0) line += ` dropped=${node.dropped}`;
    if (node.lastError !== undefined) line += ` lastError=${node.lastError.code ?? node.lastError.name}: ${node.lastError.message}`;
    lines.push(line);
    for (const child of node.children) visit(child, depth + 1);
  };
  visit(root, 0);
  return lines.join('\n');
}
