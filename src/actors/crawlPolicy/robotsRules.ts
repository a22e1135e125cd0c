import robotsParserModule from 'robots-parser';
import type { RobotsRecord } from '../partition/schema.js';
import { normalizePercentEncoding } from '../crawler/canonicalUrl.js';

/** The parser's typings declare an ES default export; the package is CommonJS exporting the function itself. */
const robotsParser = robotsParserModule as unknown as typeof robotsParserModule.default;

/** What the crawl policy may do with the URLs of one origin, from its robots.txt. */
export interface RobotsRules {
  /** True when `url` (of this origin) may be fetched. */
  allows(url: string): boolean;
  /** `Crawl-delay` for our user agent, in ms; 0 when none. */
  readonly crawlDelayMs: number;
  /** Why everything is disallowed, when it is (robots.txt unreachable). */
  readonly unreachable?: string;
}

/**
 * Turns a fetched robots.txt into rules, as RFC 9309 (Robots Exclusion Protocol) says:
 * - 2xx: the file's groups, parsed by robots-parser (longest match wins, `Allow` wins a
 *   tie, `*` and `$` wildcards), for the groups whose `User-agent` is `token` (case-
 *   insensitive, section 2.2.1; several such groups are combined) or else `*`; `/robots.txt`
 *   itself is always allowed (section 2.2.2: "The /robots.txt URI is implicitly allowed");
 *   the paths of `Allow` and `Disallow` lines get the percent-encoding normalisation of our
 *   URLs (`normalizeRulePaths`), so `Disallow: /%7euser/` matches `/~user/` (section 2.2.2:
 *   a percent-encoded unreserved octet is unencoded before comparison);
 * - 4xx other than 429 ("unavailable"): everything allowed;
 * - 5xx, 429, or no answer ("unreachable"): everything disallowed until the robots.txt is
 *   fetched again;
 * - 3xx left after the fetcher followed five redirects: unavailable, everything allowed.
 *
 * @param record the cached fetch
 * @param token our user-agent token (e.g. `shardflow`)
 */
export function robotsRules(record: RobotsRecord, token: string): RobotsRules {
  const { status } = record;
  if (status >= 200 && status < 300) {
    const robot = robotsParser(`${record.origin}/robots.txt`, normalizeRulePaths(record.body ?? ''));
    const delay = robot.getCrawlDelay(token);
    return {
      allows: (url) => isRobotsTxt(url) || robot.isAllowed(url, token) !== false,
      crawlDelayMs: typeof delay === 'number' && Number.isFinite(delay) && delay > 0 ? delay * 1000 : 0,
    };
  }
  if ((status >= 300 && status < 500 && status !== 429)) return { allows: () => true, crawlDelayMs: 0 };
  const why = status === 0 ? `robots.txt unreachable (${record.error ?? 'no answer'})` : `robots.txt unreachable (HTTP ${status})`;
  return { allows: () => false, crawlDelayMs: 0, unreachable: why };
}

/**
 * The robots.txt text with the path of every `Allow`/`Disallow` line in RFC 3986 section
 * 6.2.2 form (`normalizePercentEncoding`: unreserved escapes decoded, other escapes
 * upper-cased), the form of the URLs it is matched against (`canonicalUrl`). RFC 9309
 * section 2.2.2: "If a percent-encoded ASCII octet is encountered in the URI, it MUST be
 * unencoded prior to comparison, unless it is a reserved character".
 */
export function normalizeRulePaths(body: string): string {
  return body.replace(/^([ \t]*(?:dis)?allow[ \t]*:)(.*)$/gim, (_, key: string, value: string) => key + normalizePercentEncoding(value));
}

/** True for the `/robots.txt` URL of an origin (no query). */
function isRobotsTxt(url: string): boolean {
  try {
    const u = new URL(url);
    return u.pathname === '/robots.txt' && u.search === '';
  } catch {
    return false;
  }
}
