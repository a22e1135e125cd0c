/** Promise helpers for web-index work that a stop (a signal, a watchdog) may cut short. */

/**
 * Resolves or rejects as `work` does, or rejects as soon as one of `stops` does (a watchdog's
 * `failed`, an abort). `work` keeps running in the background: the caller stops it (by
 * stopping the web index).
 */
export function raceStops<T>(work: Promise<T>, ...stops: ReadonlyArray<Promise<never>>): Promise<T> {
  work.catch(() => undefined); // once a stop won, the work's own failure (its asks cut short) is expected
  return Promise.race([work, ...stops]);
}

/** A promise that rejects with the signal's reason when it aborts (never settles otherwise). */
export function aborted(signal: AbortSignal | undefined): Promise<never> {
  if (!signal) return new Promise<never>(() => undefined);
  const p = new Promise<never>((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
  p.catch(() => undefined);
  return p;
}
