import type { Cancel, Clock } from '../runtime/clock.js';

interface Timer {
  readonly at: number;
  readonly seq: number;
  readonly fn: () => void;
  cancelled: boolean;
}

/**
 * A {@link Clock} that only moves when told (Pekko `ManualTime`, xstate `SimulatedClock`).
 * `advance(ms)` fires due timers in time order (ties in scheduling order), setting `now()` to each
 * timer's due time first; timers scheduled while advancing fire too if they fall inside the window.
 * Promise continuations triggered by a timer run only after `advance` returns: `await settle()` then.
 */
export class ManualClock implements Clock {
  #now: number;
  #seq = 0;
  #timers: Timer[] = [];

  /** @param start initial `now()` in ms (default 0). */
  constructor(start = 0) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): Cancel {
    const timer: Timer = { at: this.#now + Math.max(0, ms), seq: this.#seq++, fn, cancelled: false };
    this.#timers.push(timer);
    return () => {
      timer.cancelled = true;
    };
  }

  /** Moves time forward by `ms` (>= 0), firing every timer due by then. */
  advance(ms: number): void {
    if (!(ms >= 0)) throw new RangeError(`advance needs ms >= 0, got ${ms}`);
    const target = this.#now + ms;
    for (;;) {
      const next = this.#nextDue(target);
      if (next === undefined) break;
      this.#timers.splice(this.#timers.indexOf(next), 1);
      this.#now = next.at;
      next.fn();
    }
    this.#now = target;
  }

  /** Due times (absolute ms) of pending timers, soonest first. */
  pendingTimers(): number[] {
    return this.#timers.filter((t) => !t.cancelled).map((t) => t.at).sort((a, b) => a - b);
  }

  #nextDue(target: number): Timer | undefined {
    this.#timers = this.#timers.filter((t) => !t.cancelled);
    let best: Timer | undefined;
    for (const timer of this.#timers) {
      if (timer.at > target) continue;
      if (best === undefined || timer.at < best.at || (timer.at === best.at && timer.seq < best.seq)) best = timer;
    }
    return best;
  }
}
