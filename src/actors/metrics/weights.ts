import type { LinkFeatures } from '../messages.js';

/**
 * A link weight function: the relative chance that a reader of the source page follows
 * this link (the "reasonable surfer"). Weights are normalised per source page by the
 * metric, so only ratios matter; a weight must be finite and >= 0.
 */
export type WeightFunction = (features: LinkFeatures) => number;

/** Every link equal: plain PageRank (Page, Brin, Motwani, Winograd 1999). */
export const uniformWeights: WeightFunction = () => 1;

/**
 * The default reasonable-surfer weights. The reasonable surfer model is US patent
 * 7,716,225 (Dean, Anderson, Battle, "Ranking documents based on user behavior and/or
 * feature data", 2010): links that readers are more likely to follow get more weight, from
 * features such as position, anchor text and whether the link is boilerplate. The factors
 * here are ours, chosen to follow its examples:
 * - rel nofollow, ugc or sponsored: 0.1 (the author vouches less for it; Google's 2019
 *   note "Evolving nofollow" treats them as hints);
 * - in `<nav>`: 0.5, in `<footer>`: 0.3 (boilerplate, repeated on every page);
 * - same host: 0.7 (internal navigation rather than a reference);
 * - anchor text: 1.0 with text, 0.6 without (an image or empty link);
 * - position: 1.2 for the first fifth of the page, falling linearly to 0.8 at the end.
 */
export const reasonableSurferWeights: WeightFunction = (f) => {
  let w = 1;
  if (f.rel.some((r) => r === 'nofollow' || r === 'ugc' || r === 'sponsored')) w *= 0.1;
  if (f.region === 'nav') w *= 0.5;
  else if (f.region === 'footer') w *= 0.3;
  if (f.sameHost) w *= 0.7;
  if (f.anchor.length === 0) w *= 0.6;
  w *= f.position < 0.2 ? 1.2 : 1.2 - 0.4 * ((f.position - 0.2) / 0.8);
  return w;
};

/** The weight function named on the command line: `uniform` or `reasonable`. @throws RangeError otherwise. */
export function weightFunction(name: string): WeightFunction {
  if (name === 'uniform') return uniformWeights;
  if (name === 'reasonable') return reasonableSurferWeights;
  throw new RangeError(`unknown weights ${JSON.stringify(name)}: use uniform or reasonable`);
}
