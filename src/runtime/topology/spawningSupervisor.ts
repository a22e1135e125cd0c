import type { Behavior } from '../actor/behavior.js';
import type { ActorRef } from '../actor/ref.js';
import type { SpawnOptions } from '../actor/spawnOptions.js';

/** Messages of a {@link spawningSupervisor}. */
export type SpawningSupervisorMessage =
  /** Spawns child `name` (answered with its ref) and watches it. */
  | { readonly type: 'spawn'; readonly name: string; readonly behavior: Behavior<any, any, any>; readonly options: SpawnOptions }
  /** Internal: a watched child terminated. */
  | { readonly type: 'gone'; readonly name: string; readonly ref: ActorRef<any, any>; readonly reason: unknown };

/**
 * A supervisor actor (kind `supervisor`) whose children come and go one at a time: what a
 * cluster host runs per stage, where every partition is started and stopped on its own. It
 * spawns a child on `spawn` (with the child's own supervision in `options`) and calls
 * `onGone(name, ref, reason)` when a child terminates, by death watch: `reason` is the
 * failure of a supervisor's `stop` directive, undefined for a stop that was asked for.
 */
export function spawningSupervisor(onGone: (name: string, ref: ActorRef<any, any>, reason: unknown) => void): Behavior<SpawningSupervisorMessage, undefined, unknown> {
  return {
    kind: 'supervisor',
    start: () => undefined,
    receive: (_state, message, ctx) => {
      if (message.type === 'spawn') {
        const ref = ctx.spawn(message.name, message.behavior, message.options);
        ctx.watch(ref, (t) => ({ type: 'gone', name: message.name, ref, reason: t.reason }));
        return ref;
      }
      onGone(message.name, message.ref, message.reason);
      return undefined;
    },
  };
}
