import { readFileSync } from 'node:fs';
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
 * A declarative link weight table: the weight of a link is the product of the factors that
 * apply to it. Every field is optional (a missing factor is 1); factors must be finite and
 * >= 0. As JSON, the same object (`--weights table.json`).
 */
export interface WeightTable {
  /** Factor per rel token (e.g. `{ "nofollow": 0.1 }`); with several tokens, the smallest applies. */
  readonly rel?: Readonly<Record<string, number>>;
  /** Factor per region of the page: `nav`, `footer`, `body`. */
  readonly region?: Readonly<Partial<Record<LinkFeatures['region'], number>>>;
  /** Factor for a link to the same host. */
  readonly sameHost?: number;
  /** Factor for a link without anchor text (an image or empty link). */
  readonly noAnchor?: number;
  /**
   * Factor for a link to the page itself (`LinkFeatures.selfLink`: `href="#top"`, a logo
   * linking home on the home page). Such a link takes the reader nowhere new, yet with weight
   * it sends part of the page's rank back to the page, round after round: a page whose only
   * link is to itself holds 1 / (1 - d) times the rank it receives (6.7x at d = 0.85) instead of
   * passing it on, a rank sink. 0 drops those links from the metric (a page left with no other
   * link is dangling; its mass stays with it, once). Default 1, as in `reasonableSurferTable`,
   * so that the scores of data dirs ranked before this factor stay comparable. Only crawled
   * links carry the flag: a graph file's self-links (kept, as its reference values count them)
   * are weighed as any other.
   */
  readonly selfLink?: number;
  /**
   * Position in the page (0 = first link, 1 = end): `start` up to `flatUntil`, then linear
   * down (or up) to `end` at the end of the page.
   */
  readonly position?: { readonly start: number; readonly end: number; readonly flatUntil?: number };
}

/**
 * The weight function of a table (see `WeightTable`).
 * @throws RangeError when a factor is not a finite number >= 0, or a field is unknown
 */
export function weightTable(table: WeightTable): WeightFunction {
  checkTable(table);
  const rel = Object.entries(table.rel ?? {});
  const region = table.region ?? {};
  const sameHost = table.sameHost ?? 1;
  const noAnchor = table.noAnchor ?? 1;
  const selfLink = table.selfLink ?? 1;
  const position = table.position;
  const flatUntil = position?.flatUntil ?? 0;
  return (f) => {
    let w = 1;
    let relFactor = 1;
    for (const [token, factor] of rel) if (f.rel.includes(token)) relFactor = Math.min(relFactor, factor);
    w *= relFactor;
    w *= region[f.region] ?? 1;
    if (f.sameHost) w *= sameHost;
    if (f.anchor.length === 0) w *= noAnchor;
    if (f.selfLink) w *= selfLink;
    if (position) {
      w *= f.position <= flatUntil || flatUntil >= 1 ? position.start : position.start + (position.end - position.start) * ((f.position - flatUntil) / (1 - flatUntil));
    }
    return w;
  };
}

/**
 * The default reasonable-surfer table. The reasonable surfer model is US patent 7,716,225
 * (Dean, Anderson, Battle, "Ranking documents based on user behavior and/or feature data",
 * 2010): links that readers are more likely to follow get more weight, from features such as
 * position, anchor text and whether the link is boilerplate. The factors here are ours,
 * chosen to follow its examples:
 * - rel nofollow, ugc or sponsored: 0.1 (the author vouches less for it; Google's 2019
 *   note "Evolving nofollow" treats them as hints);
 * - in `<nav>`: 0.5, in `<footer>`: 0.3 (boilerplate, repeated on every page);
 * - same host: 0.7 (internal navigation rather than a reference);
 * - anchor text: 1.0 with text, 0.6 without (an image or empty link);
 * - position: 1.2 for the first fifth of the page, falling linearly to 0.8 at the end.
 */
export const reasonableSurferTable: WeightTable = Object.freeze({
  rel: { nofollow: 0.1, ugc: 0.1, sponsored: 0.1 },
  region: { nav: 0.5, footer: 0.3, body: 1 },
  sameHost: 0.7,
  noAnchor: 0.6,
  position: { start: 1.2, end: 0.8, flatUntil: 0.2 },
});

/** The default reasonable-surfer weights: `weightTable(reasonableSurferTable)`. */
export const reasonableSurferWeights: WeightFunction = weightTable(reasonableSurferTable);

/**
 * The weight function named on the command line: `uniform`, `reasonable`, or the path of a
 * JSON `WeightTable` (a name ending in `.json`).
 * @throws RangeError for another name, or a table that does not parse or check
 */
export function weightFunction(name: string): WeightFunction {
  if (name === 'uniform') return uniformWeights;
  if (name === 'reasonable') return reasonableSurferWeights;
  if (name.endsWith('.json')) {
    let table: unknown;
    try {
      table = JSON.parse(readFileSync(name, 'utf8'));
    } catch (err) {
      throw new RangeError(`weights table ${name}: ${(err as Error).message}`);
    }
    try {
      return weightTable(table as WeightTable);
    } catch (err) {
      throw new RangeError(`weights table ${name}: ${(err as Error).message}`);
    }
  }
  throw new RangeError(`unknown weights ${JSON.stringify(name)}: use uniform, reasonable, or a table.json`);
}

function checkTable(table: unknown): void {
  const factor = (where: string, v: unknown) => {
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw new RangeError(`${where} must be a finite number >= 0, got ${JSON.stringify(v)}`);
  };
  if (typeof table !== 'object' || table === null || Array.isArray(table)) throw new RangeError('a weight table must be an object');
  const t = table as Record<string, unknown>;
  for (const key of Object.keys(t)) {
    if (!['rel', 'region', 'sameHost', 'noAnchor', 'selfLink', 'position'].includes(key)) throw new RangeError(`unknown field ${JSON.stringify(key)}`);
  }
  for (const map of ['rel', 'region'] as const) {
    const m = t[map];
    if (m === undefined) continue;
    if (typeof m !== 'object' || m === null || Array.isArray(m)) throw new RangeError(`${map} must be an object of factors`);
    for (const [k, v] of Object.entries(m)) {
      if (map === 'region' && !['nav', 'footer', 'body'].includes(k)) throw new RangeError(`unknown region ${JSON.stringify(k)}: nav, footer or body`);
      factor(`${map}.${k}`, v);
    }
  }
  if (t.sameHost !== undefined) factor('sameHost', t.sameHost);
  if (t.noAnchor !== undefined) factor('noAnchor', t.noAnchor);
  if (t.selfLink !== undefined) factor('selfLink', t.selfLink);
  if (t.position !== undefined) {
    const p = t.position as Record<string, unknown>;
    if (typeof p !== 'object' || p === null) throw new RangeError('position must be { start, end, flatUntil? }');
    factor('position.start', p.start);
    factor('position.end', p.end);
    if (p.flatUntil !== undefined && (typeof p.flatUntil !== 'number' || !(p.flatUntil >= 0 && p.flatUntil <= 1))) {
      throw new RangeError('position.flatUntil must be in [0, 1]');
    }
  }
}
