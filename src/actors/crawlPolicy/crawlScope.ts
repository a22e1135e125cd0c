/**
 * Which hosts a crawl fetches. URLs of other hosts still enter the frontier of their
 * partition (as `out-of-scope` entries, with their backlinks stored), so the index knows
 * them, but they are never requested. Hosts compare as `hostOf` gives them: lower-cased,
 * with `:port` when not default.
 */
export interface CrawlScope {
  allows(host: string): boolean;
  /** For logs and frontier reasons, e.g. `hosts a.example, b.example`. */
  readonly description: string;
}

/** Every host. */
export const anyHost: CrawlScope = Object.freeze({ allows: () => true, description: 'any host' });

/** Only the given hosts (lower-cased here). */
export function hostAllowList(hosts: Iterable<string>): CrawlScope {
  const set = new Set([...hosts].map((h) => h.toLowerCase()));
  return Object.freeze({ allows: (host: string) => set.has(host), description: `hosts ${[...set].sort().join(', ')}` });
}
