import type { Behavior } from '../actor/behavior.js';
import type { SpawnOptions } from '../actor/spawnOptions.js';
import type { SupervisorStrategy } from './strategy.js';

/** A plain child of a supervisor (Erlang/OTP child spec): started in list order by the supervisor. */
export interface ActorSpec {
  /** Child name, unique among its siblings, no `/`. */
  readonly name: string;
  readonly behavior: Behavior<any, any, any>;
  /** Mailbox bound; `supervision` overrides the supervisor's strategy for this child. */
  readonly options?: SpawnOptions;
}

/** A nested supervisor: its own strategy over its own children. */
export interface SupervisorSpec {
  readonly name: string;
  /** Applies to `children` (unless a child names its own `options.supervision`). */
  readonly strategy: SupervisorStrategy;
  readonly children: readonly ChildSpec[];
  /** `supervision`: how the enclosing supervisor handles this supervisor's own failures (escalations). */
  readonly options?: Pick<SpawnOptions, 'supervision'>;
}

/** A child of `ActorSystem.supervise`: a plain actor or a nested supervisor (told apart by `children`). */
export type ChildSpec = ActorSpec | SupervisorSpec;

/** True when `spec` is a nested supervisor. */
export function isSupervisorSpec(spec: ChildSpec): spec is SupervisorSpec {
  return 'children' in spec;
}
