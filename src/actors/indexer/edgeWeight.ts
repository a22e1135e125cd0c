import type { LinkFeatures } from '../messages.js';
import type { WeightFunction } from '../metrics/weights.js';

/**
 * The raw weight of a (source, target) edge: the sum of the weights of its occurrences on
 * the source page (the first one, `features`, and each of `features.repeats`, which share
 * its `sameHost` and flags). In the reasonable surfer model (US patent 7,716,225) each
 * occurrence is a link the reader may follow, so a target linked twice is twice as likely
 * to be followed as one linked once with the same features.
 * @param weigh the weight function of one occurrence (finite, >= 0)
 * @returns a finite number >= 0
 */
export function edgeWeight(weigh: WeightFunction, features: LinkFeatures): number {
  let w = weigh(features);
  for (const r of features.repeats ?? []) w += weigh({ ...features, ...r });
  return w;
}
