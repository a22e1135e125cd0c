import type { BackoffOptions } from '../strategy.js';

/**
 * Delay in ms before the `attempt`-th consecutive restart (0-based), Pekko's formula with a
 * configurable factor: `min(maxMs, minMs * factor^attempt) * (1 + random() * randomFactor)`.
 * `random` must return uniform values in [0, 1); it is not called when `randomFactor` is 0.
 */
export function backoffDelay(backoff: BackoffOptions, attempt: number, random: () => number): number {
  const base = Math.min(backoff.maxMs, backoff.minMs * backoff.factor ** attempt);
  return backoff.randomFactor === 0 ? base : base * (1 + random() * backoff.randomFactor);
}
