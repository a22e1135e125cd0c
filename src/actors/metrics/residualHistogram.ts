/**
 * Residual mass by magnitude: a partition's push report carries, per power-of-two bucket of
 * |r|, the sum of |r| of its pages in that bucket after the push, so that the coordinator can
 * pick the next round's threshold from a global residual budget (`budgetThreshold`).
 *
 * Bucket b holds |r| in [2^(b - OFFSET), 2^(b - OFFSET + 1)); smaller nonzero values go to
 * bucket 0 and larger ones to the last (their mass still counts; only the edges are clamped).
 */
export const RESIDUAL_BUCKETS = 96;
const OFFSET = 80;

/** The bucket of a nonzero |r| (see the module's doc). */
export function residualBucket(abs: number): number {
  const b = Math.floor(Math.log2(abs)) + OFFSET;
  return b < 0 ? 0 : b >= RESIDUAL_BUCKETS ? RESIDUAL_BUCKETS - 1 : b;
}

/** The lower edge of bucket `b`, 2^(b - OFFSET) (the smallest |r| it holds, but for bucket 0). */
export function bucketFloor(b: number): number {
  return 2 ** (b - OFFSET);
}

/**
 * Adds |r| of one page to `histogram` (an array of RESIDUAL_BUCKETS masses).
 */
export function addResidual(histogram: number[], r: number): void {
  if (r === 0 || !Number.isFinite(r)) return;
  const abs = Math.abs(r);
  histogram[residualBucket(abs)]! += abs;
}

/** An empty histogram. */
export function emptyHistogram(): number[] {
  return new Array<number>(RESIDUAL_BUCKETS).fill(0);
}

/**
 * The highest push threshold whose pages left below it hold at most `budget` of residual
 * mass: just under the lower edge of the first bucket b at which the masses of buckets 0 to b
 * add up to more than `budget` (0 when bucket 0's alone does; Infinity when all of them
 * together do not). Pushing every page above it then
 * leaves at most `budget` unpushed, and pushes the largest residuals first (the
 * Gauss-Southwell order: Southwell 1940, as in the push of Berkhin's bookmark-colouring
 * algorithm, Internet Mathematics 3(1), 2006, whose threshold is likewise set so that what is
 * left unpushed stays within the error allowance).
 * @param histograms one histogram per partition (RESIDUAL_BUCKETS masses each), summed here
 * @param budget residual mass (same units as r) allowed to stay unpushed
 */
export function budgetThreshold(histograms: ReadonlyArray<readonly number[]>, budget: number): number {
  let below = 0;
  for (let b = 0; b < RESIDUAL_BUCKETS; b++) {
    let mass = 0;
    for (const h of histograms) mass += h[b] ?? 0;
    // Just under the edge, so that a page at exactly 2^(b - OFFSET) is pushed too (push: |r| > threshold).
    if (below + mass > budget) return b === 0 ? 0 : bucketFloor(b) * (1 - 2 ** -20);
    below += mass;
  }
  return Infinity;
}
