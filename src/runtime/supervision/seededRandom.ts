import { InvalidArgumentError } from '../../errors.js';

/**
 * A deterministic uniform [0, 1) generator (mulberry32, 32-bit state) for backoff jitter and chaos
 * injection, so a run with the same seed fails and waits the same way.
 *
 * @param seed any integer (taken modulo 2^32).
 * @returns a function; each call advances the state. Not cryptographic.
 * @throws `InvalidArgumentError` if `seed` is not a finite integer.
 */
export function seededRandom(seed: number): () => number {
  if (!Number.isInteger(seed)) throw new InvalidArgumentError(`seed must be an integer, got ${seed}`);
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
