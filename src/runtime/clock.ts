/**
 * Time as an injected value (after xstate's `system.ts` clock and `SimulatedClock.ts`).
 *
 * Runtime code never calls `Date.now()` or the global `setTimeout` directly: it asks the
 * {@link Clock} it was given, so tests drive time with `ManualClock` (`shardflow/testing`, src/testing/manualClock.ts) and never
 * sleep.
 */

/** Cancels a timer made by {@link Clock.setTimeout}. Calling it after the timer fired, or twice, is a no-op. */
export type Cancel = () => void;

/** A source of time and one-shot timers. */
export interface Clock {
  /** Current time in milliseconds (epoch-based for {@link systemClock}; arbitrary origin for manual clocks). */
  now(): number;
  /**
   * Runs `fn` once after `ms` milliseconds (`ms <= 0` means "as soon as the clock allows").
   * @returns a {@link Cancel} that prevents the call if it has not happened yet.
   */
  setTimeout(fn: () => void, ms: number): Cancel;
}

/** The real clock: `Date.now()` and the global `setTimeout`/`clearTimeout`. Timers keep the process alive. */
export const systemClock: Clock = Object.freeze({
  now: (): number => Date.now(),
  setTimeout(fn: () => void, ms: number): Cancel {
    const handle = setTimeout(fn, Math.max(0, ms));
    return () => clearTimeout(handle);
  },
});
