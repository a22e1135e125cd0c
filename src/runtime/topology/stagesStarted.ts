import { ActorStoppedError } from '../../errors.js';
import type { ActorSystem } from '../actor/system.js';
import type { StageEntry } from './topology.js';

/**
 * Resolves once every stage partition actor (`/<stage>/p<i>`) has started once (its store
 * opened, its outbox published, its broker subscription joined): call it before the stages
 * are supervised (lifecycle events are not replayed). From then on every stage subscription
 * exists on the broker, so a run killed later leaves its messages in flight under
 * subscriptions that the next start finds (and a missing one means the broker lost it).
 * @throws ActorStoppedError when the system terminates first (a partition that cannot
 *   start exhausted its supervisor's restart intensity), with the failure as `cause`
 */
export function whenStagesStarted(system: ActorSystem, stages: readonly StageEntry[]): Promise<void> {
  const waiting = new Set(stages.flatMap((s) => Array.from({ length: s.def.input.partitioner.partitions }, (_, p) => `/${s.name}/p${p}`)));
  if (waiting.size === 0) return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const sub = system.events$.subscribe((e) => {
      if ((e.type === '@shardflow.started' || e.type === '@shardflow.restarted') && waiting.delete(e.path) && waiting.size === 0) {
        sub.unsubscribe();
        resolve();
      }
    });
    void system.whenTerminated.then((t) => {
      sub.unsubscribe();
      if (waiting.size === 0) return;
      const why = t.kind === 'failed' ? `: ${rootCause(t.error)}` : '';
      reject(new ActorStoppedError(`topology ${system.name} stopped before its stage partitions started (${[...waiting].slice(0, 3).join(', ')}${waiting.size > 3 ? ', ...' : ''} did not)${why}`, t.kind === 'failed' ? { cause: t.error } : undefined));
    });
  });
}

/** The message of the innermost cause of `err` (a restart intensity exceeded wraps the failure that repeated). */
function rootCause(err: unknown): string {
  let e = err;
  while (e instanceof Error && e.cause !== undefined) e = e.cause;
  return e instanceof Error ? e.message : String(e);
}
