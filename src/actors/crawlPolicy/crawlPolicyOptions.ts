import { InvalidArgumentError } from '../../index.js';
import type { RobotsFetch } from '../crawler/httpFetch.js';
import type { CrawlBudget } from './crawlBudget.js';
import type { CrawlScope } from './crawlScope.js';

/** Fetches a robots.txt: `HttpFetcher` in production (same host map and address rules as pages). */
export interface RobotsFetcher {
  fetchRobots(origin: string, now: number): Promise<RobotsFetch>;
  /** Our robots.txt user-agent token, e.g. `shardflow`. */
  readonly userAgentToken: string;
}

/**
 * How a crawl policy schedules. Every duration is in milliseconds of the system clock.
 * `resolveCrawlPolicyOptions` fills the defaults (the polite ones of `shardflow crawl`).
 */
export interface CrawlPolicyOptions {
  /** Requests in flight per host at once. Default 1. */
  readonly maxInFlightPerHost?: number;
  /**
   * Least time between the end of one fetch from a host and the start of the next request
   * to it (with more than one in flight: between two request starts). A robots.txt
   * `Crawl-delay` raises it, up to `maxCrawlDelayMs`. Default 1000.
   */
  readonly minDelayMs?: number;
  /** Largest `Crawl-delay` obeyed. Default 30000. */
  readonly maxCrawlDelayMs?: number;
  /** After a 2xx or 3xx answer, the URL is crawled again this much later. Default 7 days; Infinity: never. */
  readonly recrawlIntervalMs?: number;
  /** After a 404 or 410: the next look (the indexer deletes a page gone twice). Default 1 day; Infinity: never. */
  readonly goneRecrawlMs?: number;
  /**
   * ms since the epoch: every URL fetched before it (by this policy's earlier runs) is due at
   * once when the policy starts, whatever its schedule: a recrawl of everything a data dir
   * holds (`shardflow crawl --recrawl`), each page once, since the pages fetched from then on
   * are scheduled by the intervals above. Default: none.
   */
  readonly recrawlFetchedBefore?: number;
  /** After a failure (no answer, 429, 5xx): first retry delay, doubled per failure in a row up to `recrawlIntervalMs`. Default 60000. */
  readonly retryDelayMs?: number;
  /** A cached robots.txt is fetched again after this. Default 1 day. */
  readonly robotsTtlMs?: number;
  /** A robots.txt that was unreachable is tried again after this. Default 10 minutes. */
  readonly robotsRetryMs?: number;
  /** A crawl request with no result after this counts as a failure (status 0) and frees its host. Default 120000. */
  readonly requestTimeoutMs?: number;
  /**
   * robots.txt fetches in flight at once per crawl policy; the origins beyond wait their
   * turn (their hosts hold the policy busy, so quiescence waits for them). Default
   * {@link DEFAULT_MAX_ROBOTS_FETCHES}.
   */
  readonly maxRobotsFetches?: number;
  /** Hosts that are fetched; others become `out-of-scope` frontier entries. Default: every host. */
  readonly scope?: CrawlScope;
  /** Where robots.txt comes from; without it robots.txt is not consulted (graph replays). */
  readonly robots?: RobotsFetcher;
  /** Shared cap on page requests (`--max-pages`). Default: none. */
  readonly budget?: CrawlBudget;
}

/** `CrawlPolicyOptions` with every default filled in. */
export interface ResolvedCrawlPolicyOptions {
  readonly maxInFlightPerHost: number;
  readonly minDelayMs: number;
  readonly maxCrawlDelayMs: number;
  readonly recrawlIntervalMs: number;
  readonly goneRecrawlMs: number;
  readonly recrawlFetchedBefore?: number;
  readonly retryDelayMs: number;
  readonly robotsTtlMs: number;
  readonly robotsRetryMs: number;
  readonly requestTimeoutMs: number;
  readonly maxRobotsFetches: number;
  readonly scope?: CrawlScope;
  readonly robots?: RobotsFetcher;
  readonly budget?: CrawlBudget;
}

const DAY = 24 * 3600 * 1000;

/**
 * Default of `CrawlPolicyOptions.maxRobotsFetches`: 8, the fetches in flight of one crawler
 * (`CrawlerOptions.concurrency`). Unbounded, the first dispatch of a crawl started one
 * robots.txt fetch per origin at once (1,451 for polblogs); on a loaded machine their 10 s
 * timeouts then measured this process's own backlog, and each origin that timed out was
 * disallowed for `robotsRetryMs` (RFC 9309 section 2.3.1.4: unreachable means complete
 * disallow), so a replayed crawl stored 964 of its 1,489 pages.
 */
export const DEFAULT_MAX_ROBOTS_FETCHES = 8;

/**
 * No politeness: up to 256 requests in flight per host and no delay. For graphs served
 * from this process (`shardflow demo`, tests), never for other people's servers.
 */
export const unthrottled: CrawlPolicyOptions = Object.freeze({ maxInFlightPerHost: 256, minDelayMs: 0 });

/**
 * Fills the defaults and checks the values.
 * @throws InvalidArgumentError for a non-integer or < 1 `maxInFlightPerHost` or
 *   `maxRobotsFetches`, or a negative or NaN duration
 */
export function resolveCrawlPolicyOptions(options: CrawlPolicyOptions = {}): ResolvedCrawlPolicyOptions {
  const maxInFlightPerHost = options.maxInFlightPerHost ?? 1;
  if (!Number.isInteger(maxInFlightPerHost) || maxInFlightPerHost < 1) throw new InvalidArgumentError(`maxInFlightPerHost must be an integer >= 1, got ${maxInFlightPerHost}`);
  const maxRobotsFetches = options.maxRobotsFetches ?? DEFAULT_MAX_ROBOTS_FETCHES;
  if (!Number.isInteger(maxRobotsFetches) || maxRobotsFetches < 1) throw new InvalidArgumentError(`maxRobotsFetches must be an integer >= 1, got ${maxRobotsFetches}`);
  const duration = (name: string, value: number | undefined, def: number): number => {
    const v = value ?? def;
    if (!(v >= 0)) throw new InvalidArgumentError(`${name} must be a duration >= 0 ms, got ${v}`);
    return v;
  };
  return {
    maxInFlightPerHost,
    minDelayMs: duration('minDelayMs', options.minDelayMs, 1000),
    maxCrawlDelayMs: duration('maxCrawlDelayMs', options.maxCrawlDelayMs, 30_000),
    recrawlIntervalMs: duration('recrawlIntervalMs', options.recrawlIntervalMs, 7 * DAY),
    goneRecrawlMs: duration('goneRecrawlMs', options.goneRecrawlMs, DAY),
    retryDelayMs: duration('retryDelayMs', options.retryDelayMs, 60_000),
    robotsTtlMs: duration('robotsTtlMs', options.robotsTtlMs, DAY),
    robotsRetryMs: duration('robotsRetryMs', options.robotsRetryMs, 10 * 60_000),
    requestTimeoutMs: duration('requestTimeoutMs', options.requestTimeoutMs, 120_000),
    maxRobotsFetches,
    ...(options.recrawlFetchedBefore !== undefined ? { recrawlFetchedBefore: options.recrawlFetchedBefore } : {}),
    ...(options.scope ? { scope: options.scope } : {}),
    ...(options.robots ? { robots: options.robots } : {}),
    ...(options.budget ? { budget: options.budget } : {}),
  };
}
