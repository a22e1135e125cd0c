/**
 * Restart bookkeeping of one supervision unit (a child under one-for-one, a supervisor's group
 * under one-for-all / rest-for-one): restart times inside the intensity window, and the
 * consecutive-restart count that drives backoff.
 */
export class RestartBook {
  /** Clock times (ms) of restart decisions, oldest first. */
  #times: number[] = [];
  /** Consecutive restarts since the last reset (the backoff exponent). */
  #attempt = 0;
  /** Clock time (ms) at which the last restart was due to happen (decision time + delay). */
  #restartedAt = -Infinity;
  /** A message was handled without failing since the last restart (`handled`). */
  #handled = false;

  /** Restarts recorded in `(now - withinMs, now]`; forgets older ones. */
  countWithin(now: number, withinMs: number): number {
    const times = this.#times;
    let drop = 0;
    while (drop < times.length && (times[drop] as number) <= now - withinMs) drop++;
    if (drop > 0) times.splice(0, drop);
    return times.length;
  }

  /**
   * Records a restart decided at `now` and returns its backoff exponent: 0 if the unit handled a
   * message without failing since its previous restart (`handled`: it recovered, and this is a
   * new fault), or ran at least `resetAfterMs` since then, unless this failure is an `outage`
   * (the broker unreachable: a unit that fails some ms after each restart, before it did any
   * work, must back off: found by a new user, a 3 s Pulsar restart made a partition restart
   * every 30 ms, 100 restarts in 4 s, and stopped every worker); else one more than last time.
   */
  record(now: number, resetAfterMs: number, outage = false): number {
    this.#times.push(now);
    if (this.#handled || (!outage && now - this.#restartedAt >= resetAfterMs)) this.#attempt = 0;
    this.#handled = false;
    return this.#attempt++;
  }

  /** Notes that the unit handled a message without failing (cheap: called per message). */
  handled(): void {
    this.#handled = true;
  }

  /** Notes when the restart decided last will take effect (after its delay). */
  restartsAt(at: number): void {
    this.#restartedAt = at;
  }

  /** Forgets everything (after an escalation: the parent's decision starts a fresh period, as in OTP). */
  clear(): void {
    this.#times = [];
    this.#attempt = 0;
    this.#restartedAt = -Infinity;
    this.#handled = false;
  }
}
