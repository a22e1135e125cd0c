import { setImmediate as nextMacrotask } from 'node:timers/promises';

/**
 * Lets every pending promise continuation run: waits `rounds` event-loop turns (default 20). Each
 * turn drains the microtask queue completely, so chains of runtime steps that do no real I/O all
 * finish. No wall-clock sleeping: time-based steps need `ManualClock.advance` first.
 */
export async function settle(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await nextMacrotask();
}
