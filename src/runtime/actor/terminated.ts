/**
 * Notice that a watched actor stopped for good (Pekko's `Terminated` signal); see
 * `ActorContext.watch`. Restarts are not terminations: a watch survives the target's restarts.
 */
export interface Terminated {
  readonly type: '@shardflow.terminated';
  /** Path of the actor that stopped. */
  readonly path: string;
  /**
   * Why: the failure when a supervisor's `stop` directive (or a failed root escalation) ended it;
   * `undefined` for a requested stop (`ref.stop()`, parent stop, `system.terminate()`).
   */
  readonly reason: unknown;
}
