import { ActorStoppedError, hostOf, InvalidArgumentError, InvalidUrlError, isShardflowError, isTerminalError, type Clock } from '../index.js';
import type { Partitioner } from '../actors/partition/hostPartitioner.js';
import { canonicalUrl } from '../actors/crawler/canonicalUrl.js';
import { siteOf } from '../actors/crawler/site.js';
import type { LinkFeatures } from '../actors/messages.js';
import { decodeLink, type HostPages, type PartitionSummary, type PartitionReads, type RawLink, type StoredPage } from './partitionView.js';
import { isPermanentRedirect, redirectOfLinkValue } from '../actors/partition/redirects.js';

/** Options of `QueryService`. */
export interface QueryServiceOptions {
  readonly partitioner: Partitioner;
  /** The current view of partition `p` (asks its reader actor). @throws when the reader is not running */
  readonly view: (p: number) => Promise<PartitionReads>;
  readonly clock: Clock;
  /**
   * Totals and rankings (the normaliser of scores, top pages and hosts) are recomputed by a
   * walk of every partition at most this often; a stale value is served while a new one is
   * computed. Default 2000 ms.
   */
  readonly summaryTtlMs?: number;
  /**
   * What a backlinks query sorts by:
   * - `copies` (the default): what the target's partition knows of each source
   *   (docs/ARCHITECTURE.md, "Backlinks carry their source's metric"): for a source on
   *   another partition, the copy of its x kept in the backlink, within COPY_RELATIVE_BOUND
   *   (5%) of x once the messages of the last round are applied (x is within the metric's
   *   tolerance of x + r); for a source on the same partition, its x + r. The query reads the
   *   target's partition alone; a backlink whose copy has not arrived yet scores 0.
   * - `sources`: x + r read from each source's own partition (a multi-get per partition
   *   holding a source: a fan-out per query), for comparison (`npm run bench -- query`).
   */
  readonly backlinkScores?: 'copies' | 'sources';
}

/** A query's answer: found, or not found with why. */
export type QueryResult<T> = { readonly found: true; readonly body: T } | { readonly found: false; readonly reason: string; readonly detail?: unknown };

/** Paging of list queries. */
export interface Paging {
  /** Items to return, 1..1000. Default 20. */
  readonly limit?: number;
  /** Items to skip, >= 0. Default 0. */
  readonly offset?: number;
}

/** `GET /v1/page`: see docs/query-api.md. */
export interface PageBody {
  readonly url: string;
  readonly host: string;
  readonly partition: number;
  readonly status: number;
  readonly contentType: string | null;
  readonly contentHash: string | null;
  readonly error: string | null;
  /** When the page was fetched; null for a page loaded from a graph file (`rank`), which no crawler fetched. */
  readonly fetchedAt: string | null;
  /** The normalised score; 0 for an alias, which has none of its own. */
  readonly score: number;
  /** x and r as stored (for an alias: the rank it passed on to its target, not a score). */
  readonly rank: { readonly x: number; readonly r: number };
  readonly counts: { readonly outlinks: number; readonly backlinks: number };
  /**
   * The target when the URL is a permanent redirect (301, 308): an alias of it in the link
   * graph, its links counted as links to the target (docs/crawling.md, "Redirects and
   * aliases"); null for any other page.
   */
  readonly aliasOf: string | null;
  readonly crawl: CrawlBody | null;
}

/** The crawl policy's view of a URL. */
export interface CrawlBody {
  readonly state: string;
  readonly discoveredAt: string | null;
  readonly requestedAt: string | null;
  readonly dueAt: string | null;
  readonly fetches: number;
  readonly failures: number;
  readonly reason: string | null;
}

/** One link in `outlinks`/`backlinks` answers. */
export interface LinkBody {
  readonly url: string;
  readonly score: number;
  /** The first occurrence's anchor text. */
  readonly anchor: string;
  /** Every occurrence's anchor text on the source page, in document order (`anchor` first). */
  readonly anchors: readonly string[];
  /** How many times the source page links to the target (1 and more). */
  readonly occurrences: number;
  readonly rel: readonly string[];
  readonly region: LinkFeatures['region'];
  readonly sameHost: boolean;
  /** True when source and target are of the same site (registrable domain); null when unknown (graph files, older links). */
  readonly sameSite: boolean | null;
  /** True when the link points at its own page. */
  readonly selfLink: boolean;
  readonly position: number;
  /** The edge's raw weight: the sum of its occurrences' weights. */
  readonly weight: number;
  /**
   * Backlinks only, present for a link that reaches the page through aliases (permanent
   * redirects): the aliases in the order followed, from the one `url` links to. `url`,
   * the features and the weight are those of the link to the first alias.
   */
  readonly via?: readonly string[];
}

/** `GET /v1/outlinks` and `GET /v1/backlinks`. */
export interface LinksBody {
  readonly url: string;
  readonly total: number;
  readonly offset: number;
  readonly limit: number;
  readonly links: LinkBody[];
}

/** `GET /v1/hosts/:host`. */
export interface HostBody {
  readonly host: string;
  readonly partition: number;
  readonly pages: number;
  /** Sum of the scores of the host's pages. */
  readonly authority: number;
  readonly top: Array<{ readonly url: string; readonly score: number }>;
}

/** `GET /v1/top/pages`. */
export interface TopPagesBody {
  readonly pages: number;
  readonly top: Array<{ readonly url: string; readonly score: number }>;
}

/** `GET /v1/top/hosts`. */
export interface TopHostsBody {
  readonly hosts: number;
  /**
   * Per host: live pages, authority (sum of their normalised scores) and, from the hosts
   * index, the best page and its score (`best`, `max`).
   */
  readonly top: Array<{ readonly host: string; readonly pages: number; readonly authority: number; readonly max?: number; readonly best?: string }>;
  /**
   * `index`: read from the hosts index every partition keeps (refreshed when the metric
   * converges; `indexedAt` is the oldest partition's refresh, wall-clock ms); `walk`: no
   * index yet, computed by walking every page.
   */
  readonly source: 'index' | 'walk';
  readonly indexedAt?: number;
}

/** `GET /v1/top/sites`. */
export interface TopSitesBody {
  /** Sites with at least one live page. */
  readonly sites: number;
  /**
   * Per site (registrable domain, `siteOf`), highest authority first: its hosts with live
   * pages, live pages, authority (sum of their normalised scores) and, from the hosts index,
   * the best page and its score.
   */
  readonly top: Array<{ readonly site: string; readonly hosts: number; readonly pages: number; readonly authority: number; readonly max?: number; readonly best?: string }>;
  /** As `TopHostsBody.source`. */
  readonly source: 'index' | 'walk';
  readonly indexedAt?: number;
}

/**
 * Most aliases a backlink is followed through (a chain of permanent redirects); the crawl
 * stores none longer than `--max-redirects` (default 10).
 */
const MAX_ALIAS_HOPS = 20;

/** Most items a list query returns, and the depth of the per-partition rankings. */
export const MAX_LIMIT = 1000;
const DEFAULT_LIMIT = 20;
const VIEW_ATTEMPTS = 20;

interface Summary {
  readonly total: number;
  readonly pages: number;
  readonly parts: readonly PartitionSummary[];
}

/**
 * The queries of the HTTP API, routed to the partition that owns each key (the URL's or
 * host's partition, by the index's partitioner), read through the partitions' views.
 *
 * Scores are normalised at read time: score = (x + r) / the sum of x + r over every live
 * page of every partition (the normaliser comes from the cached summary). Backlinks are
 * sorted by the copies of their sources' x kept with them on the target's partition
 * (`backlinkScores`: or, for comparison, by the sources' x + r read from their partitions
 * with one multi-get each).
 *
 * Errors: InvalidUrlError and InvalidArgumentError for bad input (HTTP 400); a not-found
 * result for unknown pages and hosts (404); ActorStoppedError when a partition's reader
 * does not come back (503).
 */
export class QueryService {
  readonly #o: QueryServiceOptions;
  readonly #ttl: number;
  readonly #views = new Map<number, Promise<PartitionReads>>();
  #summary: { at: number; value: Summary } | undefined;
  #computing: Promise<Summary> | undefined;

  constructor(options: QueryServiceOptions) {
    this.#o = options;
    this.#ttl = options.summaryTtlMs ?? 2000;
  }

  get partitioner(): Partitioner {
    return this.#o.partitioner;
  }

  /** A page: record, crawl state, score and counts. @throws InvalidUrlError */
  async page(rawUrl: string): Promise<QueryResult<PageBody>> {
    const [{ url, p, stored }, summary] = await Promise.all([this.#locate(rawUrl), this.#summaryValue()]);
    const missing = notFoundReason(url, stored);
    if (missing) return { found: false, reason: missing, ...(stored.frontier ? { detail: { crawl: crawlBody(stored) } } : {}) };
    const record = stored.record!;
    const rank = stored.rank ?? { x: 0, r: 0 };
    return {
      found: true,
      body: {
        url,
        host: hostOf(url),
        partition: p,
        status: record.status,
        contentType: record.contentType ?? null,
        contentHash: record.contentHash ?? null,
        error: record.error ?? null,
        // A graph file's pages carry fetchedAt 0 (graphPage): unknown, not 1970.
        fetchedAt: record.fetchedAt > 0 ? iso(record.fetchedAt) : null,
        score: record.aliasOf !== undefined ? 0 : normalise(rank.x + rank.r, summary.total),
        rank,
        counts: { outlinks: record.outlinkCount, backlinks: stored.backlinks },
        aliasOf: record.aliasOf ?? null,
        crawl: crawlBody(stored),
      },
    };
  }

  /** A page's outlinks, in document order, with each target's score. @throws InvalidUrlError, InvalidArgumentError */
  async outlinks(rawUrl: string, paging: Paging = {}): Promise<QueryResult<LinksBody>> {
    const { limit, offset } = checkPaging(paging);
    // A canonical URL (the usual query) is its own key: its outlinks are read with its page, not after.
    let canonical: string | undefined;
    try {
      canonical = canonicalUrl(rawUrl);
    } catch {
      // #locate says why, or finds it stored as given
    }
    const early = canonical === rawUrl ? this.#read(this.#o.partitioner.forUrl(rawUrl), (v) => v.outlinks(rawUrl)) : undefined;
    early?.catch(() => {}); // awaited below unless #locate throws first
    const { url, p, stored } = await this.#locate(rawUrl);
    const links = early && url === rawUrl ? await early : await this.#read(p, (v) => v.outlinks(url));
    const missing = notFoundReason(url, stored);
    if (missing) return { found: false, reason: missing };
    links.sort((a, b) => a.features.position - b.features.position || (a.url < b.url ? -1 : 1));
    const page = links.slice(offset, offset + limit);
    const [scores, summary] = await Promise.all([this.#rawScores(page.map((l) => l.url)), this.#summaryValue()]);
    return { found: true, body: { url, total: links.length, offset, limit, links: page.map((l, i) => linkBody(l, normalise(scores[i]!, summary.total))) } };
  }

  /**
   * A page's backlinks, sorted by the source's score (highest first, then by source URL):
   * by default the copies of the sources' metric kept on the page's partition, so only that
   * partition is read (and the cached summary's normaliser); see `backlinkScores`. The links
   * to its aliases (sources whose link to it is a permanent redirect's, and so on up the
   * chain) are backlinks too, with the aliases they went through in `via`: the metric counts
   * them as links to the page (each alias's backlinks are read on the alias's partition). An
   * alias has no score of its own: its link scores 0. Found when the URL has a page or any
   * backlink. @throws InvalidUrlError, InvalidArgumentError
   */
  async backlinks(rawUrl: string, paging: Paging = {}): Promise<QueryResult<LinksBody>> {
    const { limit, offset } = checkPaging(paging);
    const { url, p, stored } = await this.#locate(rawUrl);
    const direct = await this.#read(p, (v) => v.backlinks(url));
    if (direct.length === 0) {
      const missing = notFoundReason(url, stored);
      if (missing) return { found: false, reason: missing };
    }
    const links = await this.#throughAliases(url, direct);
    const [scores, summary] = await Promise.all([
      (this.#o.backlinkScores ?? 'copies') === 'copies'
        ? links.map(({ link }) => (isPermanentRedirect(redirectOfLinkValue(link.value) ?? 0) ? 0 : link.metric ?? 0))
        : this.#rawScores(links.map((l) => l.link.url)),
      this.#summaryValue(),
    ]);
    // Sorted by the scores as shown (normalised): two raw values may round to one shown score,
    // which then ties and goes by URL (found by a new user: equal scores out of URL order).
    const shown = (scores as number[]).map((x) => normalise(x, summary.total));
    const order = links.map((_, i) => i);
    order.sort((a, b) => shown[b]! - shown[a]! || (links[a]!.link.url < links[b]!.link.url ? -1 : 1) || links[a]!.via.length - links[b]!.via.length);
    const page = order.slice(offset, offset + limit).map((i) => {
      const body = linkBody(decodeLink(links[i]!.link), shown[i]!);
      return links[i]!.via.length > 0 ? { ...body, via: links[i]!.via } : body;
    });
    return { found: true, body: { url, total: links.length, offset, limit, links: page } };
  }

  /**
   * The key a query's URL is stored under, its partition and what is stored there. A crawl
   * stores pages under their canonical URL (`canonicalUrl`); a graph file's pages are stored
   * as the file writes them (a graph's node names, compared with its reference scores as written: `http://A.TEST/` and `http://a.test/`, or
   * `http://h/?a=1&#38;b=2`, whose canonical form drops a fragment, are other pages), so a URL
   * that is not in canonical form is first looked up exactly as given, on its own partition,
   * and when nothing is stored there (no record, frontier entry or backlink) under its
   * canonical form, as a crawl stores it. A canonical URL is read once.
   * @throws InvalidUrlError when the URL has no canonical form and nothing is stored under it as given
   */
  async #locate(rawUrl: string): Promise<{ url: string; p: number; stored: StoredPage }> {
    let url: string | undefined;
    let invalid: unknown;
    try {
      url = canonicalUrl(rawUrl);
    } catch (e) {
      if (!(e instanceof InvalidUrlError)) throw e;
      invalid = e;
    }
    if (url !== rawUrl && ABSOLUTE_URL.test(rawUrl)) {
      const p = this.#o.partitioner.forUrl(rawUrl);
      const stored = await this.#read(p, (v) => v.page(rawUrl));
      if (isStored(stored)) return { url: rawUrl, p, stored };
    }
    if (url === undefined) throw invalid;
    const p = this.#o.partitioner.forUrl(url);
    return { url, p, stored: await this.#read(p, (v) => v.page(url)) };
  }

  /**
   * `direct` (the backlinks of `url`) followed by the backlinks of every alias among their
   * sources, breadth first: a source whose link is a permanent redirect's (`redirectOfLinkValue`)
   * is an alias of `url`, and its own backlinks reach `url` through it. Each alias is
   * expanded once (a chain never loops), at most MAX_ALIAS_HOPS deep.
   */
  async #throughAliases(url: string, direct: readonly RawLink[]): Promise<Array<{ link: RawLink; via: readonly string[] }>> {
    const out = direct.map((link) => ({ link, via: [] as readonly string[] }));
    const expanded = new Set([url]);
    for (let i = 0; i < out.length; i++) {
      const { link, via } = out[i]!;
      const status = redirectOfLinkValue(link.value);
      if (status === undefined || !isPermanentRedirect(status) || via.length >= MAX_ALIAS_HOPS || expanded.has(link.url)) continue;
      expanded.add(link.url);
      let q: number;
      try {
        q = this.#o.partitioner.forUrl(link.url);
      } catch {
        continue; // a stored key always parses; nothing to follow otherwise
      }
      for (const through of await this.#read(q, (v) => v.backlinks(link.url))) out.push({ link: through, via: [link.url, ...via] });
    }
    return out;
  }

  /**
   * A host: live pages, authority (sum of their scores), best pages. The host is looked up in
   * its canonical form (`checkHost`: lower case, IDNA, no default port), as a crawl stores its
   * URLs, and first as given in lower case when that differs (a graph file's URLs are kept as
   * written: `ünï.test`, `a.test:80`), as `#locate` does for a URL.
   * @throws InvalidArgumentError
   */
  async host(rawHost: string, paging: Pick<Paging, 'limit'> = {}): Promise<QueryResult<HostBody>> {
    const canonical = checkHost(rawHost);
    const { limit } = checkPaging({ ...paging, offset: 0 });
    const asGiven = rawHost.trim().toLowerCase();
    const candidates = asGiven !== canonical && asGiven !== '' && !/[/?#@\s]/.test(asGiven) ? [asGiven, canonical] : [canonical];
    const summary = this.#summaryValue();
    summary.catch(() => undefined); // awaited below
    let host = canonical;
    let p = this.#o.partitioner.forHost(canonical);
    let pages: HostPages | undefined;
    for (const c of candidates) {
      const q = this.#o.partitioner.forHost(c);
      const found = await this.#read(q, (v) => v.hostPages(c, limit));
      if (found.pages > 0 || c === canonical) [host, p, pages] = [c, q, found];
      if (found.pages > 0) break;
    }
    if (!pages || pages.pages === 0) return { found: false, reason: `no live page of host ${canonical} is stored` };
    const { total } = await summary;
    return {
      found: true,
      body: {
        host,
        partition: p,
        pages: pages.pages,
        authority: normalise(pages.raw, total),
        top: pages.top.map((t) => ({ url: t.url, score: normalise(t.raw, total) })),
      },
    };
  }

  /** The best pages of the whole index. @throws InvalidArgumentError */
  async topPages(paging: Pick<Paging, 'limit'> = {}): Promise<TopPagesBody> {
    const { limit } = checkPaging({ ...paging, offset: 0 });
    const s = await this.#summaryValue();
    const all = s.parts.flatMap((part) => part.topPages).map((t) => ({ url: t.url, score: normalise(t.raw, s.total) }));
    all.sort((a, b) => b.score - a.score || (a.url < b.url ? -1 : 1)); // as shown (see backlinks)
    return { pages: s.pages, top: all.slice(0, limit) };
  }

  /** The best hosts of the whole index by authority. @throws InvalidArgumentError */
  async topHosts(paging: Pick<Paging, 'limit'> = {}): Promise<TopHostsBody> {
    const { limit } = checkPaging({ ...paging, offset: 0 });
    const indexes = await Promise.all(Array.from({ length: this.#o.partitioner.partitions }, (_, p) => this.#read(p, (v) => v.hostIndex())));
    if (indexes.every((i) => i.totals !== undefined)) {
      const total = indexes.reduce((t, i) => t + i.totals!.total, 0);
      const all = indexes.flatMap((i) => i.hosts);
      all.sort((a, b) => b[1].sum - a[1].sum || (a[0] < b[0] ? -1 : 1));
      return {
        hosts: all.length,
        top: all.slice(0, limit).map(([host, h]) => ({ host, pages: h.pages, authority: normalise(h.sum, total), max: normalise(h.max, total), best: h.best })),
        source: 'index',
        indexedAt: Math.min(...indexes.map((i) => i.totals!.at)),
      };
    }
    const s = await this.#summaryValue();
    const all = s.parts.flatMap((part) => part.topHosts);
    all.sort((a, b) => b.raw - a.raw || (a.host < b.host ? -1 : 1));
    return { hosts: all.length, top: all.slice(0, limit).map((h) => ({ host: h.host, pages: h.pages, authority: normalise(h.raw, s.total) })), source: 'walk' };
  }

  /**
   * The sites of highest authority: the hosts index of every partition (or, before the
   * metric first converged, a walk of every page) grouped by registrable domain (`siteOf`);
   * a site's hosts may live on several partitions. @throws InvalidArgumentError for a bad limit
   */
  async topSites(paging: Pick<Paging, 'limit'> = {}): Promise<TopSitesBody> {
    const { limit } = checkPaging({ ...paging, offset: 0 });
    const parts = this.#o.partitioner.partitions;
    const indexes = await Promise.all(Array.from({ length: parts }, (_, p) => this.#read(p, (v) => v.hostIndex())));
    const sites = new Map<string, { hosts: number; pages: number; sum: number; max: number; best?: string }>();
    const add = (host: string, h: { pages: number; sum: number; max?: number; best?: string }) => {
      const site = siteOf(host);
      const s = sites.get(site) ?? { hosts: 0, pages: 0, sum: 0, max: -1 };
      s.hosts++;
      s.pages += h.pages;
      s.sum += h.sum;
      if (h.max !== undefined && (h.max > s.max || (h.max === s.max && h.best! < s.best!))) [s.max, s.best] = [h.max, h.best!];
      sites.set(site, s);
    };
    let total: number;
    let source: TopSitesBody['source'];
    if (indexes.every((i) => i.totals !== undefined)) {
      total = indexes.reduce((t, i) => t + i.totals!.total, 0);
      for (const i of indexes) for (const [host, h] of i.hosts) add(host, h);
      source = 'index';
    } else {
      const walks = await Promise.all(Array.from({ length: parts }, (_, p) => this.#read(p, (v) => v.summary(0, Infinity))));
      total = walks.reduce((t, w) => t + w.total, 0);
      for (const w of walks) for (const h of w.topHosts) add(h.host, { pages: h.pages, sum: h.raw });
      source = 'walk';
    }
    const all = [...sites].sort((a, b) => b[1].sum - a[1].sum || (a[0] < b[0] ? -1 : 1));
    return {
      sites: all.length,
      top: all.slice(0, limit).map(([site, s]) => ({
        site, hosts: s.hosts, pages: s.pages, authority: normalise(s.sum, total),
        ...(s.best !== undefined ? { max: normalise(s.max, total), best: s.best } : {}),
      })),
      source,
      ...(source === 'index' ? { indexedAt: Math.min(...indexes.map((i) => i.totals!.at)) } : {}),
    };
  }

  /** Forgets the cached summary (after a crawl or a GC pass, to read fresh totals at once). */
  invalidate(): void {
    this.#summary = undefined;
  }

  async #rawScores(urls: readonly string[]): Promise<number[]> {
    const byPartition = new Map<number, number[]>();
    urls.forEach((u, i) => {
      let q: number;
      try {
        q = this.#o.partitioner.forUrl(u);
      } catch {
        return;
      }
      let list = byPartition.get(q);
      if (!list) byPartition.set(q, (list = []));
      list.push(i);
    });
    const out = new Array<number>(urls.length).fill(0);
    await Promise.all([...byPartition].map(async ([q, idx]) => {
      const scores = await this.#read(q, (v) => v.rawScores(idx.map((i) => urls[i]!)));
      idx.forEach((i, k) => (out[i] = scores[k]!));
    }));
    return out;
  }

  async #summaryValue(): Promise<Summary> {
    const now = this.#o.clock.now();
    const cached = this.#summary;
    if (cached && now - cached.at < this.#ttl) return cached.value;
    const computing = (this.#computing ??= this.#computeSummary().finally(() => (this.#computing = undefined)));
    if (!cached) return computing;
    // Stale while revalidating: nobody awaits this walk, so its failure (a partition refused
    // or unowned) must not be an unhandled rejection, which ends the process (found by a new
    // user: a warm `serve --cluster` died when a partition was refused); the next read after
    // the TTL walks again.
    computing.catch(() => {});
    return cached.value;
  }

  async #computeSummary(): Promise<Summary> {
    const at = this.#o.clock.now();
    const parts = await Promise.all(Array.from({ length: this.#o.partitioner.partitions }, (_, p) => this.#read(p, (v) => v.summary(MAX_LIMIT))));
    const value = { total: parts.reduce((a, s) => a + s.total, 0), pages: parts.reduce((a, s) => a + s.pages, 0), parts };
    this.#summary = { at, value };
    return value;
  }

  /**
   * Runs `read` on partition `p`'s view, asking the reader again when the view closed (a
   * restart); an error flagged `terminal` (a remote read that no owner answered in time) is
   * thrown at once.
   */
  async #read<T>(p: number, read: (v: PartitionReads) => Promise<T>): Promise<T> {
    let last: unknown;
    for (let attempt = 0; attempt < VIEW_ATTEMPTS; attempt++) {
      let pending = this.#views.get(p);
      if (!pending) {
        pending = this.#o.view(p);
        this.#views.set(p, pending);
        pending.catch(() => this.#views.delete(p));
      }
      try {
        const view = await pending;
        if (view.closed) throw new ActorStoppedError('view closed');
        return await read(view);
      } catch (err) {
        last = err;
        if (!isShardflowError(err) || !['SF_ERR_STORE_CLOSED', 'SF_ERR_ACTOR_STOPPED', 'SF_ERR_ASK_TIMEOUT'].includes(err.code) || isTerminalError(err)) throw err;
        this.#views.delete(p);
        await new Promise<void>((resolve) => this.#o.clock.setTimeout(resolve, Math.min(250, 5 * 2 ** attempt)));
      }
    }
    throw new ActorStoppedError(`partition ${p} is not answering: ${(last as Error)?.message ?? last}`, { cause: last });
  }
}

/** An absolute URL as a graph file may name a page: a scheme, `://`, a host, no white space (graph/graphFile.ts's check). */
const ABSOLUTE_URL = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#\s][^\s]*$/;

/** True when anything is stored for the URL: a record, a frontier entry or a backlink. */
function isStored(stored: StoredPage): boolean {
  return stored.record !== undefined || stored.frontier !== undefined || stored.backlinks > 0;
}

function notFoundReason(url: string, stored: StoredPage): string | undefined {
  if (stored.record && !stored.record.deleted) return undefined;
  if (stored.record?.deleted) return `page ${url} was deleted (gone twice, or removed by the garbage collector)`;
  if (stored.frontier) return `page ${url} is known to the crawl frontier (${stored.frontier.state ?? 'requested'}${stored.frontier.reason ? `: ${stored.frontier.reason}` : ''}) but no fetch of it is stored`;
  if (stored.backlinks > 0) return `page ${url} is linked (${stored.backlinks} backlinks) but was never fetched`;
  return `no page stored for ${url}`;
}

function crawlBody(stored: StoredPage): CrawlBody | null {
  const f = stored.frontier;
  if (!f) return null;
  return {
    state: f.state ?? 'requested',
    discoveredAt: iso(f.discoveredAt),
    requestedAt: f.requestedAt > 0 ? iso(f.requestedAt) : null,
    dueAt: iso(f.dueAt),
    fetches: f.fetches ?? 0,
    failures: f.failures ?? 0,
    reason: f.reason ?? null,
  };
}

function linkBody(l: { url: string; features: LinkFeatures; weight: number }, score: number): LinkBody {
  const f = l.features;
  return {
    url: l.url, score, anchor: f.anchor, anchors: [f.anchor, ...(f.repeats ?? []).map((r) => r.anchor)], occurrences: 1 + (f.repeats?.length ?? 0),
    rel: f.rel, region: f.region, sameHost: f.sameHost, sameSite: f.sameSite ?? null, selfLink: f.selfLink ?? false, position: f.position, weight: l.weight,
  };
}

function normalise(raw: number, total: number): number {
  return total > 0 ? raw / total : 0;
}

function iso(ms: number | undefined): string | null {
  return ms === undefined || !Number.isFinite(ms) ? null : new Date(ms).toISOString();
}

function checkPaging(paging: Paging): { limit: number; offset: number } {
  const limit = paging.limit ?? DEFAULT_LIMIT;
  const offset = paging.offset ?? 0;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) throw new InvalidArgumentError(`limit must be an integer in [1, ${MAX_LIMIT}], got ${limit}`);
  if (!Number.isSafeInteger(offset) || offset < 0) throw new InvalidArgumentError(`offset must be an integer from 0 to ${Number.MAX_SAFE_INTEGER}, got ${offset}`);
  return { limit, offset };
}

/** A host as `hostOf` gives it (lower-case, `:port` when not default). @throws InvalidArgumentError */
export function checkHost(raw: string): string {
  let url: URL;
  try {
    url = new URL(`http://${raw.trim()}/`);
  } catch {
    throw new InvalidArgumentError(`not a host: ${JSON.stringify(raw)}`);
  }
  if (url.pathname !== '/' || url.search || url.username || url.hostname === '' || /[/?#@]/.test(raw.trim())) throw new InvalidArgumentError(`not a host: ${JSON.stringify(raw)}`);
  return url.host;
}

