import type { ActorCell } from '../../actor/cell.js';
import type { Cancel } from '../../clock.js';
import { findCause, RestartIntensityExceededError } from '../../../errors.js';
import type { Decision, SupervisionScope, SupervisorStrategy } from '../strategy.js';
import { backoffDelay } from './backoffDelay.js';

/**
 * Applies `child`'s supervisor strategy to its failure (Pekko `internal/Supervision.scala`,
 * Erlang/OTP `supervisor:restart_child`). Runs on `parent`'s supervision chain, one decision at a
 * time; gives up as soon as `signal` (the parent's incarnation) is aborted, or if the failure is
 * stale (the child has been restarted or stopped since).
 *
 * - resume: the child goes on with its state (a child whose `start()` failed is stopped instead);
 * - stop: the affected children stop for good, last started first;
 * - escalate: the child stays suspended (`failed`); the parent fails with the same error;
 * - restart: if the restart limit allows, the affected children are torn down (last started
 *   first, each `stop()` after its own children's), then after the backoff delay (if any) started
 *   again in order with their mailboxes intact. The delay does not hold up the chain: a timer
 *   queues the start step, so other children's failures are handled meanwhile.
 */
export async function superviseFailure(
  parent: ActorCell,
  child: ActorCell,
  error: unknown,
  incarnation: number,
  signal: AbortSignal,
): Promise<void> {
  if (signal.aborted || child.incarnation !== incarnation || child.status !== 'failed') return;
  const strategy = child.strategy;
  const decision = strategy.decide(error);
  const directive = decision.directive === 'resume' && !child.live ? 'stop' : decision.directive;
  switch (directive) {
    case 'resume':
      child.resume();
      return;
    case 'escalate':
      escalate(parent, child, error);
      return;
    case 'stop':
      for (const target of affected(parent, child, strategy.scope).reverse()) {
        if (signal.aborted) return;
        await target.stop(error);
      }
      return;
    case 'restart':
      await restart(parent, child, error, strategy, decision, signal);
      return;
  }
}

function escalate(parent: ActorCell, child: ActorCell, error: unknown): void {
  parent.host.emit('@shardflow.escalated', child, error);
  parent.escalate(error);
}

/** Children a restart/stop applies to, in start order. */
function affected(parent: ActorCell, child: ActorCell, scope: SupervisionScope): ActorCell[] {
  if (scope === 'one-for-one') return [child];
  const siblings = parent.orderedChildren();
  if (scope === 'one-for-all') return siblings;
  const index = siblings.indexOf(child);
  return index < 0 ? [child] : siblings.slice(index);
}

async function restart(
  parent: ActorCell,
  child: ActorCell,
  error: unknown,
  strategy: SupervisorStrategy,
  decision: Decision,
  signal: AbortSignal,
): Promise<void> {
  const { clock } = parent.host;
  const now = clock.now();
  const book = strategy.scope === 'one-for-one' ? child.restartBook : parent.groupBook;
  const limit = strategy.limit;
  if (limit !== undefined && book.countWithin(now, limit.withinMs) >= limit.maxRestarts) {
    book.clear();
    const reason = new RestartIntensityExceededError(
      child.path,
      `more than ${limit.maxRestarts} restarts within ${limit.withinMs} ms`,
      { cause: error },
    );
    escalate(parent, child, reason);
    return;
  }
  const backoff = decision.backoff;
  const attempt = book.record(now, backoff?.resetAfterMs ?? 0, isOutage(error));
  const delayMs = backoff === undefined ? 0 : backoffDelay(backoff, attempt, strategy.random ?? parent.host.random);
  book.restartsAt(now + delayMs);

  const targets = affected(parent, child, strategy.scope);
  for (const target of [...targets].reverse()) {
    if (signal.aborted) return;
    if (target.markRestarting()) await target.teardown('restart');
  }
  if (signal.aborted) return;
  const waiting = targets.filter((target) => target.status === 'restarting');
  if (delayMs <= 0) {
    await startInOrder(waiting, signal);
    return;
  }
  if (waiting.length === 0) return;

  // Backoff: one timer for the group; cancelled if the parent is torn down or every target left backoff.
  let remaining = waiting.length;
  let cancelTimer: Cancel | undefined;
  const onAbort = (): void => cancelTimer?.();
  const leave = (): void => {
    if (--remaining === 0) {
      cancelTimer?.();
      signal.removeEventListener('abort', onAbort);
    }
  };
  for (const target of waiting) target.enterBackoff(delayMs, leave);
  signal.addEventListener('abort', onAbort, { once: true });
  cancelTimer = clock.setTimeout(() => {
    signal.removeEventListener('abort', onAbort);
    void parent.enqueueSupervision(() => startInOrder(waiting, signal));
  }, delayMs);
}

async function startInOrder(targets: readonly ActorCell[], signal: AbortSignal): Promise<void> {
  for (const target of targets) {
    if (signal.aborted) return;
    if (target.status === 'restarting' || target.status === 'backoff') await target.start();
  }
}

/**
 * Whether `error` (or one of its causes, up to 8 deep) says the broker is unreachable
 * (`BrokerDisconnectedError`, code `SF_ERR_BROKER_DISCONNECTED`): a failure to back off from
 * until the child works again (`RestartBook.record`).
 */
function isOutage(error: unknown): boolean {
  return findCause(error, (e) => e.code === 'SF_ERR_BROKER_DISCONNECTED') !== undefined;
}
