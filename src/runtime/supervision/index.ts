/**
 * Supervision as values (after Pekko Typed `SupervisorStrategy`, Erlang/OTP `supervisor`). The
 * restart machinery is in `internal/` and not exported.
 */
export { SupervisorStrategy } from './strategy.js';
export type {
  BackoffInput,
  BackoffOptions,
  Decision,
  DeciderRule,
  Directive,
  ErrorMatcher,
  RestartLimit,
  SupervisionScope,
} from './strategy.js';
export type { ActorSpec, ChildSpec, SupervisorSpec } from './childSpec.js';
export { isSupervisorSpec } from './childSpec.js';
export { seededRandom } from './seededRandom.js';
