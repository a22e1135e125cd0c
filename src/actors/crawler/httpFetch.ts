import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import { Agent, buildConnector, request, type Dispatcher } from 'undici';
import { hostOf, InvalidUrlError, isShardflowError } from '../../index.js';
import type { FetchResult } from '../messages.js';
import { canonicalUrl } from './canonicalUrl.js';
import { decodeBody } from './decodeBody.js';
import { extractLinks, parseDirectives } from './extractLinks.js';
import { isPublicAddress } from './publicAddress.js';
import { sameSite } from './site.js';

/** Options of `HttpFetcher`. */
export interface HttpFetcherOptions {
  /**
   * Host-to-address map: `host` or `host:port` -> `address:port` (`host:443` matches
   * `https://host/`, `host:80` matches `http://host/`: the default port is a port). A mapped host is reached
   * at that address (no DNS, no proxy); the request still names the original host, so the
   * server sees an ordinary request for the real URL. Only mapped hosts may be reached on
   * private or loopback addresses.
   */
  readonly hostMap?: ReadonlyMap<string, string>;
  /** Largest body read, in bytes; a larger one is cut and the page stored as oversized. Default 2 MiB. */
  readonly maxBodyBytes?: number;
  /** Time to headers and between body chunks, in ms. Default 10000. */
  readonly timeoutMs?: number;
  /** Time for the whole fetch (connect, headers, body), in ms. Default 30000. */
  readonly totalTimeoutMs?: number;
  /** Parallel connections per origin. Default 4. */
  readonly connections?: number;
  /** User-Agent header sent with every request. Default `DEFAULT_USER_AGENT`. */
  readonly userAgent?: string;
  /**
   * The product token matched against robots.txt `User-agent` lines (RFC 9309 section
   * 2.2.1: letters, `_` and `-` only, matched case-insensitively), `<meta name=TOKEN>` and
   * `X-Robots-Tag: TOKEN: ...`. Separate from `userAgent`: a browser-style User-Agent
   * (`Mozilla/5.0 (compatible; Bot/1.0)`) does not make the token `mozilla`. Default
   * `DEFAULT_ROBOTS_TOKEN`.
   */
  readonly robotsToken?: string;
  /**
   * Most redirects a chain may have, counted from the requested URL (`A -> B` is one).
   * Default `DEFAULT_MAX_REDIRECTS`; 0 makes every redirect an over-long chain.
   */
  readonly maxRedirects?: number;
}

/**
 * Default cap on a redirect chain: 10 hops, what Googlebot follows ("Googlebot follows up to
 * 10 redirect hops", Google Search Central, "HTTP status codes ... affect Google Search");
 * RFC 9309 section 2.3.1.2 asks at least five of robots.txt fetches, RFC 9110 section 15.4
 * asks a client to detect and intervene in cyclical redirections without fixing a number.
 */
export const DEFAULT_MAX_REDIRECTS = 10;

/** The default User-Agent header. */
export const DEFAULT_USER_AGENT = 'shardflow/0.1 (+https://github.com/shardflow)';
/** The default robots.txt product token. */
export const DEFAULT_ROBOTS_TOKEN = 'shardflow';

/**
 * Checks a robots.txt product token as RFC 9309 section 2.2.1 defines it: one or more of
 * `a-z`, `A-Z`, `_`, `-`. @returns the token lower-cased (matching is case-insensitive)
 * @throws RangeError naming the token and the rule
 */
export function checkRobotsToken(token: string): string {
  if (!/^[A-Za-z_-]+$/.test(token)) throw new RangeError(`robots token ${JSON.stringify(token)}: RFC 9309 section 2.2.1 allows only letters, "_" and "-"`);
  return token.toLowerCase();
}

/** What `fetchRobots` got for a host's `/robots.txt`. */
export interface RobotsFetch {
  /** The robots.txt URL asked for (`<origin>/robots.txt`). */
  readonly url: string;
  /** Final HTTP status after redirects; 0 when there was no response. */
  readonly status: number;
  /** ms since the epoch. */
  readonly fetchedAt: number;
  /** The text when `status` is 2xx (cut at 512 KiB, as RFC 9309 allows). */
  readonly body?: string;
  readonly error?: string;
}

const ROBOTS_MAX_BYTES = 512 * 1024;
const ROBOTS_MAX_REDIRECTS = 5;

/**
 * Fetches pages with undici and turns each answer into the `FetchResult` the indexer
 * stores. Never throws for a page's own faults: network errors, timeouts, refused
 * addresses and oversized bodies come back with `status` (0 when there was no response)
 * and `error`, so the crawl goes on and the outcome is stored.
 *
 * What a result carries, by answer:
 * - 3xx with a `Location`: no body; `outlinks` holds the canonical redirect target (rel
 *   `redirect`, `LinkFeatures.redirect` the status: the indexer makes a 301/308 an alias of
 *   its target, and the metric passes a redirect's rank on undamped), so the redirect is recorded as a link and its target is crawled through
 *   the frontier like any discovered URL (politeness, robots.txt and de-duplication apply
 *   to it); `error` says `redirect (301) to <url>`. Before that, the chain is checked: its
 *   next hops are asked with HEAD requests (status and `Location` only, no politeness
 *   delay), and a chain that comes back to a URL it passed (a loop) or has more than
 *   `maxRedirects` hops is stored with `error` `redirect loop: A -> B -> A (301 to B)` or
 *   `redirect chain longer than N hops: ...` and no outlinks, so a loop soaks up no rank
 *   and an over-long chain is not crawled further. Every page of a loop gets that error
 *   (each is a start of the loop).
 * - other non-2xx: `error` `HTTP <status>`, no body.
 * - 2xx, not HTML (`text/html` or `application/xhtml+xml`): content type only, stored
 *   without parsing.
 * - 2xx HTML: the body decoded (`decodeBody`: BOM, header charset, `<meta charset>`,
 *   UTF-8). When the page or its `X-Robots-Tag` header says `noindex`, the body is left
 *   out, `error` says `noindex`, and `outlinks` carries its links (none under `nofollow`).
 *   When only the header says `nofollow`, `outlinks` is `[]` and the body is kept. Otherwise
 *   the indexer extracts the links from the body (`extractLinks`).
 *
 * Addresses: a host in `hostMap` is connected to at its mapped address; any other host is
 * resolved with DNS and refused when an address it resolves to (or the literal address
 * of the URL) is loopback, private, link-local or otherwise non-public (`isPublicAddress`),
 * with `error` `refused: ...`. The check runs at connect time on the addresses connected
 * to, so a DNS answer that changes between check and connect cannot bypass it.
 */
export class HttpFetcher {
  readonly #agent: Agent;
  readonly #maxBody: number;
  readonly #totalTimeout: number;
  readonly #userAgent: string;
  readonly #token: string;
  readonly #maxRedirects: number;

  /** @throws RangeError for a malformed `hostMap` entry or `robotsToken` */
  constructor(options: HttpFetcherOptions = {}) {
    this.#maxBody = options.maxBodyBytes ?? 2 * 1024 * 1024;
    const timeout = options.timeoutMs ?? 10_000;
    this.#totalTimeout = options.totalTimeoutMs ?? 30_000;
    this.#userAgent = options.userAgent ?? DEFAULT_USER_AGENT;
    this.#token = checkRobotsToken(options.robotsToken ?? DEFAULT_ROBOTS_TOKEN);
    this.#maxRedirects = options.maxRedirects ?? DEFAULT_MAX_REDIRECTS;
    if (!Number.isInteger(this.#maxRedirects) || this.#maxRedirects < 0) throw new RangeError(`maxRedirects must be an integer >= 0, got ${this.#maxRedirects}`);
    const map = new Map<string, string>();
    for (const [host, address] of options.hostMap ?? []) {
      const colon = address.lastIndexOf(':');
      if (colon <= 0 || !/^\d+$/.test(address.slice(colon + 1))) throw new RangeError(`host map entry ${host}=${address}: expected address:port`);
      map.set(host.toLowerCase(), address);
    }
    const direct = buildConnector({ timeout });
    const guarded = buildConnector({ timeout, lookup: publicOnlyLookup } as buildConnector.BuildOptions);
    this.#agent = new Agent({
      connections: options.connections ?? 4,
      headersTimeout: timeout,
      bodyTimeout: timeout,
      connect: (opts, callback) => {
        // undici passes an empty port for the scheme's default one (URL.port is '' then):
        // `host:443` and `host:80` entries must still match.
        const port = opts.port || (opts.protocol === 'https:' ? '443' : '80');
        const target = map.get(`${opts.hostname}:${port}`) ?? map.get(opts.hostname);
        if (target) {
          const colon = target.lastIndexOf(':');
          return direct({ ...opts, hostname: target.slice(0, colon), host: target, port: target.slice(colon + 1), servername: opts.hostname }, callback);
        }
        if (isIP(stripBrackets(opts.hostname)) !== 0 && !isPublicAddress(opts.hostname)) {
          callback(new InvalidUrlError(opts.hostname, `refused: ${opts.hostname} is not a public address`), null);
          return;
        }
        return guarded(opts, callback);
      },
    });
  }

  /** The robots.txt product token of this fetcher (`robotsToken`, lower-cased). */
  get userAgentToken(): string {
    return this.#token;
  }

  /**
   * Fetches `url` (canonical) and interprets the answer (see the class doc).
   * @param now stamps `fetchedAt` (ms since the epoch)
   */
  async fetch(url: string, now: number): Promise<FetchResult> {
    const res = await this.#get(url, this.#maxBody, 'text/html,application/xhtml+xml,*/*;q=0.5');
    if (!('headers' in res)) return { url, status: 0, fetchedAt: now, error: res.error };
    const { status, headers } = res;
    const contentType = headerValue(headers['content-type']);
    const base = { url, status, fetchedAt: now, ...(contentType ? { contentType } : {}) };
    if ('error' in res) return { ...base, error: res.error };
    if (status >= 300 && status < 400) {
      const location = headerValue(headers.location);
      let target: string | undefined;
      try {
        target = location ? canonicalUrl(location, url) : undefined;
      } catch {
        target = undefined;
      }
      if (!target) return { ...base, error: `redirect (${status}) without a valid Location${location ? `: ${JSON.stringify(location)}` : ''}` };
      if (target === url) return { ...base, error: `redirect (${status}) to itself` };
      const broken = await this.#checkChain(url, target);
      if (broken) return { ...base, error: `${broken} (${status} to ${target})` };
      const [from, to] = [hostOf(url), hostOf(target)]; // both canonical: they parse
      const locality = { sameHost: from === to, sameSite: sameSite(from, to) };
      return { ...base, error: `redirect (${status}) to ${target}`, outlinks: [{ target, features: { anchor: '', position: 0, rel: ['redirect'], ...locality, region: 'body', redirect: status } }] };
    }
    if (status < 200 || status >= 300) return { ...base, error: `HTTP ${status}` };
    if (!/^\s*(text\/html|application\/xhtml\+xml)\b/i.test(contentType)) return base;
    const decoded = decodeBody(res.body, contentType);
    const header = robotsHeader(headers['x-robots-tag'], this.#token);
    const note = decoded.note;
    if (header.noIndex || header.noFollow || /<meta[^>]+name\s*=\s*["']?(robots|shardflow)\b/i.test(decoded.text)) {
      const found = extractLinks(decoded.text, url, { robotsDirectives: [header.noIndex ? 'noindex' : '', header.noFollow ? 'nofollow' : ''].join(' '), userAgentToken: this.#token, maxOutlinks: Infinity }); // the indexer applies its cap and records it
      if (found.noIndex) {
        const why = [`noindex (${header.noIndex ? 'X-Robots-Tag' : 'meta robots'})`, found.noFollow ? 'nofollow' : '', note ?? ''].filter(Boolean).join('; ');
        return { ...base, error: why, outlinks: found.outlinks };
      }
      if (header.noFollow) return { ...base, body: decoded.text, outlinks: found.outlinks, error: ['nofollow (X-Robots-Tag)', note ?? ''].filter(Boolean).join('; ') };
    }
    return { ...base, body: decoded.text, ...(note ? { error: note } : {}) };
  }

  /**
   * Fetches `<origin>/robots.txt`, following up to five redirects (RFC 9309 section
   * 2.3.1.2), each hop under the same address rules as pages; reads at most 512 KiB.
   * @param origin e.g. `http://example.com` or `https://example.com:8443`
   * @param now stamps `fetchedAt`
   */
  async fetchRobots(origin: string, now: number): Promise<RobotsFetch> {
    const first = `${origin}/robots.txt`;
    let url = first;
    for (let hop = 0; ; hop++) {
      const res = await this.#get(url, ROBOTS_MAX_BYTES, 'text/plain,*/*;q=0.5', true);
      if (!('headers' in res)) return { url: first, status: 0, fetchedAt: now, error: res.error };
      if (res.status >= 300 && res.status < 400) {
        const location = headerValue(res.headers.location);
        if (!location || hop >= ROBOTS_MAX_REDIRECTS) return { url: first, status: res.status, fetchedAt: now, error: location ? 'too many redirects' : 'redirect without Location' };
        try {
          url = canonicalUrl(location, url);
        } catch (err) {
          return { url: first, status: res.status, fetchedAt: now, error: (err as Error).message };
        }
        continue;
      }
      if ('error' in res) return { url: first, status: res.status, fetchedAt: now, error: res.error };
      if (res.status < 200 || res.status >= 300) return { url: first, status: res.status, fetchedAt: now };
      return { url: first, status: res.status, fetchedAt: now, body: new TextDecoder('utf-8').decode(res.body) };
    }
  }

  /**
   * Follows the redirect chain that starts `url -> target` (HEAD requests: status and
   * `Location` only) to its first non-redirect answer, at most `maxRedirects` hops.
   * @returns why the chain is broken (`redirect loop: A -> B -> A`, `redirect chain longer
   *   than N hops: A -> ...`), or undefined for a chain that ends (in any answer, or an
   *   unusable `Location`, which its own page will record when it is crawled)
   */
  async #checkChain(url: string, target: string): Promise<string | undefined> {
    const chain = [url, target];
    const seen = new Set([url]);
    let current = target;
    for (;;) {
      if (seen.has(current)) return `redirect loop: ${chain.join(' -> ')}`;
      if (chain.length - 1 > this.#maxRedirects) return `redirect chain longer than ${this.#maxRedirects} hops: ${chain.slice(0, 3).join(' -> ')} -> ...`;
      seen.add(current);
      const next = await this.#redirectOf(current);
      if (next === undefined) return undefined;
      chain.push(next);
      current = next;
    }
  }

  /**
   * The canonical `Location` of `url` when a HEAD request answers 3xx with a usable one,
   * else undefined. HEAD gives the status and headers GET would (RFC 9110 section 9.3.2)
   * without a body; a server that refuses HEAD (405) ends the chain check there.
   */
  async #redirectOf(url: string): Promise<string | undefined> {
    let res: Dispatcher.ResponseData;
    try {
      res = await request(url, { dispatcher: this.#agent, method: 'HEAD', headers: { 'user-agent': this.#userAgent }, signal: AbortSignal.timeout(this.#totalTimeout) });
    } catch {
      return undefined;
    }
    res.body.on('error', () => undefined);
    res.body.destroy();
    if (res.statusCode < 300 || res.statusCode >= 400) return undefined;
    const location = headerValue(res.headers.location);
    try {
      return location ? canonicalUrl(location, url) : undefined;
    } catch {
      return undefined;
    }
  }

  async close(): Promise<void> {
    await this.#agent.close();
  }

  /**
   * One GET, no redirects followed; the body is read only for 2xx answers (others are
   * drained). `truncate` cuts an oversized body instead of failing.
   */
  async #get(url: string, maxBytes: number, accept: string, truncate = false): Promise<
    | { status: number; headers: Dispatcher.ResponseData['headers']; body: Uint8Array }
    | { status: number; headers: Dispatcher.ResponseData['headers']; error: string }
    | { status: 0; error: string }
  > {
    let res: Dispatcher.ResponseData;
    try {
      res = await request(url, {
        dispatcher: this.#agent,
        method: 'GET',
        headers: { 'user-agent': this.#userAgent, accept },
        signal: AbortSignal.timeout(this.#totalTimeout),
      });
    } catch (err) {
      return { status: 0, error: describeFailure(err) };
    }
    const { statusCode: status, headers } = res;
    if (status < 200 || status >= 300) {
      res.body.resume();
      res.body.on('error', () => undefined);
      return { status, headers, body: new Uint8Array(0) };
    }
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of res.body) {
        const c = chunk as Buffer;
        if (size + c.length > maxBytes) {
          if (truncate) {
            chunks.push(c.subarray(0, maxBytes - size));
            size = maxBytes;
          }
          res.body.destroy();
          if (!truncate) return { status, headers, error: `oversized: body exceeds ${maxBytes} bytes` };
          break;
        }
        size += c.length;
        chunks.push(c);
      }
    } catch (err) {
      // An answer cut off (the connection closed or timed out mid-body) is no answer: the
      // fetch failed and is retried like one, and listed (found by a new user: stored as a
      // fetched page without links, its next fetch a week later, in no list).
      if (!(truncate && size >= maxBytes)) return { status: 0, error: `body read failed (HTTP ${status}): ${describeFailure(err)}` };
    }
    return { status, headers, body: Buffer.concat(chunks) };
  }
}

/** DNS lookup for `net.connect` that fails when any address of the host is not public. */
function publicOnlyLookup(
  hostname: string,
  options: { family?: number; all?: boolean; hints?: number },
  callback: (err: Error | null, address: string | LookupAddress[], family?: number) => void,
): void {
  dnsLookup(hostname, { ...(options.family ? { family: options.family } : {}), ...(options.hints ? { hints: options.hints } : {}), all: true }, (err, addresses) => {
    if (err) return callback(err, []);
    const bad = addresses.find((a) => !isPublicAddress(a.address));
    if (bad) return callback(new InvalidUrlError(hostname, `refused: ${hostname} resolves to non-public address ${bad.address}`), []);
    if (options.all) return callback(null, addresses);
    const first = addresses[0];
    if (!first) return callback(new InvalidUrlError(hostname, `no address for ${hostname}`), []);
    callback(null, first.address, first.family);
  });
}

/** A fetch failure as text: `refused: ...` for refused addresses, else `fetch failed: ...`. */
function describeFailure(err: unknown): string {
  let e: unknown = err;
  for (let i = 0; i < 4 && e; i++) {
    if (isShardflowError(e) && e.message.startsWith('refused:')) return e.message;
    e = (e as { cause?: unknown }).cause;
  }
  const name = (err as Error)?.name;
  if (name === 'TimeoutError' || name === 'AbortError') return 'fetch failed: timed out';
  const cause = (err as { cause?: Error })?.cause;
  return `fetch failed: ${(err as Error)?.message ?? String(err)}${cause?.message ? ` (${cause.message})` : ''}`;
}

function headerValue(v: string | string[] | undefined): string {
  return Array.isArray(v) ? (v[0] ?? '') : (v ?? '');
}

function stripBrackets(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/**
 * The `X-Robots-Tag` directives for us: unprefixed ones and those prefixed with our token
 * (`shardflow: noindex`); directives for other crawlers (`googlebot: noindex`) are ignored.
 */
function robotsHeader(v: string | string[] | undefined, token: string): { noIndex: boolean; noFollow: boolean } {
  const values = Array.isArray(v) ? v : v ? [v] : [];
  let noIndex = false;
  let noFollow = false;
  for (const value of values) {
    const m = /^\s*([a-z0-9_-]+)\s*:(.*)$/i.exec(value);
    if (m && !/^(noindex|nofollow|none|unavailable_after|max-)/i.test(m[1]!) && m[1]!.toLowerCase() !== token) continue;
    const d = parseDirectives(m && m[1]!.toLowerCase() === token ? m[2]! : value);
    noIndex ||= d.noIndex;
    noFollow ||= d.noFollow;
  }
  return { noIndex, noFollow };
}
