import { Parser } from 'htmlparser2';
import type { LinkFeatures, LinkOccurrence, Outlink } from '../messages.js';
import { canonicalUrl } from './canonicalUrl.js';
import { parseDeclarativeRefresh } from './metaRefresh.js';
import { sameSite } from './site.js';
import { hostOf } from '../../index.js';

/** What `extractLinks` found in a page. */
export interface ExtractedLinks {
  /**
   * One entry per distinct target, in the document order of its first occurrence, with that
   * occurrence's features and every later occurrence in `features.repeats` (anchor text,
   * position, rel, region), then the `rel=canonical` target when it differs from the page; at most `maxOutlinks`
   * entries (see `truncated`). Empty when the page says `nofollow` (see `noFollow`).
   */
  readonly outlinks: Outlink[];
  /** hrefs that were skipped, with why (does not parse, other scheme, credentials). */
  readonly rejected: Array<{ href: string; reason: string }>;
  /**
   * End tags the parser had to imply that the HTML standard does not let a page omit
   * (`isParseErrorEndTag`): > 0 means the HTML has parse errors. Void elements, optional end
   * tags and self-closing tags in SVG or MathML are valid and not counted.
   */
  readonly impliedEndTags: number;
  /** `<meta name="robots">` said `nofollow` or `none`: the page's links are not followed. */
  readonly noFollow: boolean;
  /** `<meta name="robots">` said `noindex` or `none`: the page's content is not indexed. */
  readonly noIndex: boolean;
  /** Links left out because of `noFollow` (before de-duplication). */
  readonly notFollowed: number;
  /** The canonical URL of `<link rel="canonical" href>`, when present and valid. */
  readonly canonical?: string;
  /**
   * The first valid `<meta http-equiv="refresh">` with a URL (`parseDeclarativeRefresh`):
   * its delay in seconds and canonical target. It is also an outlink of rel `refresh`
   * unless it names the page itself.
   */
  readonly refresh?: { readonly delay: number; readonly target: string };
  /**
   * Set when the page names more distinct targets (canonical included) than `maxOutlinks`:
   * `found` distinct targets, the first `kept` of them in `outlinks`.
   */
  readonly truncated?: { readonly found: number; readonly kept: number };
}

/** What `extractLinks` may be told beyond the page. */
export interface ExtractLinksOptions {
  /**
   * Robots directives from outside the HTML (the `X-Robots-Tag` header), merged with the
   * page's `<meta name="robots">`: e.g. `noindex, nofollow`.
   */
  readonly robotsDirectives?: string;
  /** User-agent token whose `<meta name="TOKEN">` directives also apply. Default `shardflow`. */
  readonly userAgentToken?: string;
  /**
   * Most distinct targets kept (the first ones in document order; a `rel=canonical` target
   * is kept in place of the last one). Default `DEFAULT_MAX_OUTLINKS`; `Infinity`: no cap.
   */
  readonly maxOutlinks?: number;
}

/**
 * Default cap on the distinct outlinks kept per page: 10,000. Well-kept crawlers cap them
 * too: Heritrix 3 keeps 6,000 per URI (`CrawlURI.MAX_OUTLINKS`, counting the discarded
 * ones), crawler4j 5,000 (`maxOutLinks`), Nutch 100 by default (`db.max.outlinks.per.page`).
 * 10,000 keeps whole every page those keep whole, while a page that lists 200,000 links
 * (a generated sitemap page, a link farm) costs the indexer, the backlinks and the metric
 * what 10,000 links cost, and its link operations stay 20 `links/<q>` messages.
 */
export const DEFAULT_MAX_OUTLINKS = 10_000;

const REL_TOKENS = new Set(['nofollow', 'ugc', 'sponsored']);

/**
 * Void elements: they have no end tag (HTML Living Standard, 13.1.2 "Elements", void
 * elements), plus the obsolete ones htmlparser2 also treats as void.
 */
const VOID_ELEMENTS = new Set(['area', 'base', 'br', 'col', 'embed', 'hr', 'img', 'input', 'link', 'meta', 'source', 'track', 'wbr',
  'basefont', 'bgsound', 'frame', 'keygen', 'param', 'image', 'isindex', 'command']);

/**
 * Elements whose end tag may be omitted (HTML Living Standard, 13.1.2.4 "Optional tags"),
 * which are also those the tree builder lets stay open at the end of the file without a
 * parse error (13.2.6.4.7, "An end-of-file token").
 */
const OPTIONAL_END_TAGS = new Set(['html', 'head', 'body', 'li', 'dt', 'dd', 'p', 'rt', 'rp', 'rb', 'rtc', 'optgroup', 'option',
  'colgroup', 'caption', 'thead', 'tbody', 'tfoot', 'tr', 'td', 'th']);

/**
 * Whether an end tag htmlparser2 implied is a parse error of the page: not for a void
 * element, an element whose end tag is optional, or any element inside `<svg>` or `<math>`
 * (foreign content closes its self-closing tags, which htmlparser2 reports as implied).
 * @param name the lower-case tag name
 * @param foreignDepth how many `<svg>`/`<math>` elements are open
 */
function isParseErrorEndTag(name: string, foreignDepth: number): boolean {
  return !VOID_ELEMENTS.has(name) && !OPTIONAL_END_TAGS.has(name) && foreignDepth === 0;
}
const MAX_ANCHOR = 256;
/** HTML characters handed to the parser at a time by `extractLinksChunked`. */
const PARSE_SLICE = 64 * 1024;
/** Parsing time after which `extractLinksChunked` yields to the event loop, in ms. */
const PARSE_BUDGET_MS = 8;

interface RawOccurrence {
  anchor: string;
  readonly rel: string[];
  readonly region: LinkFeatures['region'];
  /** Index among all the page's links (duplicates included), for `position`. */
  readonly index: number;
}

interface RawLink extends RawOccurrence {
  readonly target: string;
  /** The later occurrences of the same target. */
  readonly repeats: RawOccurrence[];
}

/**
 * Extracts the outlinks of an HTML page with htmlparser2 (forgiving: malformed HTML still
 * yields its links, and `impliedEndTags` counts the end tags it lacked that HTML requires). Records per link its
 * anchor text, position, rel tokens, same-host and same-site (`siteOf`) flags, self-link flag and whether it sits in
 * `<nav>` or `<footer>`; a target linked several times is one outlink that keeps every
 * occurrence (`features.repeats`), so every anchor text reaches its backlinks.
 *
 * Rules:
 * - links are `<a href>` and `<area href>`; hrefs resolve against the first `<base href>`
 *   (itself resolved against the page URL) and are canonicalised (`canonicalUrl`);
 * - `<link rel="canonical" href>` names the page's preferred URL: when it differs from the
 *   page URL it becomes one more outlink, with rel `canonical`, position 0 and no anchor
 *   (the page hands its weight to the URL it prefers, as a redirect does);
 * - `<meta name="robots" content>` (and `<meta name="shardflow">`, and the
 *   `X-Robots-Tag` directives given in `options`): `nofollow` or `none` drop every link
 *   except the canonical one (the links are neither crawled nor counted); `noindex` or
 *   `none` set `noIndex` and leave the decision to the caller;
 * - `<meta http-equiv="refresh" content>` (the first whose content parses by the HTML
 *   standard's shared declarative refresh steps, `parseDeclarativeRefresh`) with a URL other
 *   than the page's is an outlink of rel `refresh`, position 0, no anchor: a redirect-like
 *   link, kept under `nofollow` like the canonical one (the page sends every reader there);
 *   when the page also links the target, it is one more occurrence of that link;
 * - `rel` tokens kept are `nofollow`, `ugc`, `sponsored` (they lower a link's weight);
 * - at most `maxOutlinks` distinct targets are kept (`truncated` says how many there were);
 *   the rest are still canonicalised to count them, but keep no features. Work and memory
 *   are linear in the page's size.
 *
 * @param html the decoded body
 * @param pageUrl the canonical URL of the page (the base for relative links)
 * @throws RangeError when `maxOutlinks` is not a number >= 1
 */
export function extractLinks(html: string, pageUrl: string, options: ExtractLinksOptions = {}): ExtractedLinks {
  const collector = linkCollector(pageUrl, options);
  collector.parser.write(html);
  return collector.finish();
}

/**
 * `extractLinks` that hands the HTML to the parser 64 KiB at a time and yields to the event
 * loop (`setImmediate`) whenever it has parsed for 8 ms since the last yield: a page of
 * several MiB (200,000 links parse in about 0.4 s) then never holds up the actors of other
 * partitions. Same result as `extractLinks`.
 * @throws RangeError when `maxOutlinks` is not a number >= 1
 */
export async function extractLinksChunked(html: string, pageUrl: string, options: ExtractLinksOptions = {}): Promise<ExtractedLinks> {
  const collector = linkCollector(pageUrl, options);
  let since = performance.now();
  for (let i = 0; i < html.length; i += PARSE_SLICE) {
    collector.parser.write(html.slice(i, i + PARSE_SLICE));
    if (performance.now() - since >= PARSE_BUDGET_MS) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      since = performance.now();
    }
  }
  return collector.finish();
}

/** A parser that collects a page's links, and `finish()`, which ends it and builds the result. */
function linkCollector(pageUrl: string, options: ExtractLinksOptions): { parser: Parser; finish(): ExtractedLinks } {
  const max = options.maxOutlinks ?? DEFAULT_MAX_OUTLINKS;
  if (!(max >= 1)) throw new RangeError(`maxOutlinks must be >= 1, got ${max}`);
  let base = pageUrl;
  let baseSeen = false;
  const token = (options.userAgentToken ?? 'shardflow').toLowerCase();
  const pageHost = hostOf(pageUrl);
  // Distinct targets in document order: the first `max` with their occurrences, the others
  // only counted (`seen` holds every distinct target, so duplicates never count twice).
  const kept: RawLink[] = [];
  const keptByTarget = new Map<string, RawLink>();
  const seen = new Set<string>();
  let linkCount = 0;
  const rejected: ExtractedLinks['rejected'] = [];
  let impliedEndTags = 0;
  let directives = parseDirectives(options.robotsDirectives ?? '');
  let canonicalHref: string | undefined;
  let refreshContent: string | undefined;
  let nav = 0;
  let footer = 0;
  let foreign = 0;
  let open: RawOccurrence | undefined;

  const parser = new Parser(
    {
      onopentag(name, attrs) {
        if (name === 'svg' || name === 'math') foreign++;
        if (name === 'nav') nav++;
        else if (name === 'footer') footer++;
        else if (name === 'base' && attrs.href !== undefined && !baseSeen) {
          baseSeen = true;
          try {
            base = canonicalUrl(attrs.href, pageUrl);
          } catch (err) {
            rejected.push({ href: attrs.href, reason: (err as Error).message });
          }
        } else if (name === 'meta' && refreshContent === undefined && (attrs['http-equiv'] ?? '').toLowerCase() === 'refresh' &&
          attrs.content !== undefined && parseDeclarativeRefresh(attrs.content) !== undefined) {
          refreshContent = attrs.content; // the first one that parses: it sets "will declaratively refresh"
        } else if (name === 'meta' && attrs.name !== undefined) {
          const who = attrs.name.toLowerCase();
          if (who === 'robots' || who === token) directives = mergeDirectives(directives, parseDirectives(attrs.content ?? ''));
        } else if (name === 'link' && attrs.href !== undefined && canonicalHref === undefined &&
          (attrs.rel ?? '').toLowerCase().split(/\s+/).includes('canonical')) {
          canonicalHref = attrs.href;
        } else if ((name === 'a' || name === 'area') && attrs.href !== undefined) {
          let target: string;
          try {
            target = canonicalUrl(attrs.href, base);
          } catch (err) {
            rejected.push({ href: attrs.href, reason: (err as Error).message });
            return;
          }
          const index = linkCount++;
          if (name === 'a') open = undefined; // an uncounted link's text is nobody's anchor
          const rel = (attrs.rel ?? '').toLowerCase().split(/\s+/).filter((t) => REL_TOKENS.has(t));
          const occurrence: RawOccurrence = { anchor: name === 'area' ? (attrs.alt ?? '') : '', rel, region: nav > 0 ? 'nav' : footer > 0 ? 'footer' : 'body', index };
          const first = keptByTarget.get(target);
          if (first) {
            first.repeats.push(occurrence);
          } else {
            if (seen.has(target)) return;
            seen.add(target);
            if (kept.length >= max) return;
            const link: RawLink = { ...occurrence, target, repeats: [] };
            kept.push(link);
            keptByTarget.set(target, link);
            if (name === 'a') open = link;
            return;
          }
          if (name === 'a') open = occurrence;
        }
      },
      ontext(text) {
        if (open && open.anchor.length < MAX_ANCHOR) open.anchor += text;
      },
      onclosetag(name, isImplied) {
        if (isImplied && isParseErrorEndTag(name, name === 'svg' || name === 'math' ? foreign - 1 : foreign)) impliedEndTags++;
        if ((name === 'svg' || name === 'math') && foreign > 0) foreign--;
        if (name === 'a') open = undefined;
        else if (name === 'nav' && nav > 0) nav--;
        else if (name === 'footer' && footer > 0) footer--;
      },
    },
    { decodeEntities: true, lowerCaseTags: true, lowerCaseAttributeNames: true },
  );

  const finish = (): ExtractedLinks => {
    parser.end();
    let canonical: string | undefined;
    if (canonicalHref !== undefined) {
      try {
        canonical = canonicalUrl(canonicalHref, base);
      } catch (err) {
        rejected.push({ href: canonicalHref, reason: (err as Error).message });
      }
    }
    const locality = (target: string) => {
      try {
        const host = hostOf(target);
        return { sameHost: host === pageHost, sameSite: sameSite(host, pageHost) };
      } catch {
        return { sameHost: false, sameSite: false };
      }
    };
    let refresh: ExtractedLinks['refresh'];
    const parsedRefresh = refreshContent === undefined ? undefined : parseDeclarativeRefresh(refreshContent);
    if (parsedRefresh?.url !== undefined) {
      try {
        refresh = { delay: parsedRefresh.delay, target: canonicalUrl(parsedRefresh.url, pageUrl) };
      } catch (err) {
        rejected.push({ href: parsedRefresh.url, reason: (err as Error).message });
      }
    }
    const outlinks: Outlink[] = [];
    let found = 0;
    if (!directives.noFollow) {
      found = seen.size;
      const occurrence = (o: RawOccurrence): LinkOccurrence => ({
        anchor: o.anchor.replace(/\s+/g, ' ').trim().slice(0, MAX_ANCHOR),
        position: linkCount > 0 ? o.index / linkCount : 0,
        rel: o.rel,
        region: o.region,
      });
      for (const l of kept) {
        outlinks.push({
          target: l.target,
          features: {
            ...occurrence(l),
            ...locality(l.target),
            ...(l.repeats.length > 0 ? { repeats: l.repeats.map(occurrence) } : {}),
            ...(l.target === pageUrl ? { selfLink: true } : {}),
          },
        });
      }
    }
    if (canonical !== undefined && canonical !== pageUrl && (directives.noFollow || !seen.has(canonical))) {
      found++;
      // The page's preferred URL outweighs its last body link when the cap is reached.
      if (outlinks.length >= max) outlinks.pop();
      outlinks.push({ target: canonical, features: { anchor: '', position: 0, rel: ['canonical'], ...locality(canonical), region: 'body' } });
    }
    if (refresh !== undefined && refresh.target !== pageUrl) {
      // Like a redirect, the refresh is where the page sends every reader: kept under
      // nofollow and beyond the cap, as one more occurrence when the page also links there.
      const occurrence = { anchor: '', position: 0, rel: ['refresh'], region: 'body' as const };
      const at = outlinks.findIndex((l) => l.target === refresh.target);
      if (at >= 0) {
        const l = outlinks[at]!;
        outlinks[at] = { target: l.target, features: { ...l.features, repeats: [...(l.features.repeats ?? []), occurrence] } };
      } else {
        if (!seen.has(refresh.target) || directives.noFollow) found++;
        if (outlinks.length >= max) outlinks.splice(outlinks.findLastIndex((l) => !l.features.rel.includes('canonical')), 1);
        outlinks.push({ target: refresh.target, features: { ...occurrence, ...locality(refresh.target) } });
      }
    }
    return {
      outlinks,
      rejected,
      impliedEndTags,
      noFollow: directives.noFollow,
      noIndex: directives.noIndex,
      notFollowed: directives.noFollow ? linkCount : 0,
      ...(canonical !== undefined ? { canonical } : {}),
      ...(refresh !== undefined ? { refresh } : {}),
      ...(found > outlinks.length ? { truncated: { found, kept: outlinks.length } } : {}),
    };
  };
  return { parser, finish };
}

interface Directives {
  readonly noFollow: boolean;
  readonly noIndex: boolean;
}

/** Reads `noindex`, `nofollow`, `none` (both) from a robots directive list; other tokens are ignored. */
export function parseDirectives(content: string): Directives {
  const tokens = content.toLowerCase().split(/[\s,]+/);
  const none = tokens.includes('none');
  return { noFollow: none || tokens.includes('nofollow'), noIndex: none || tokens.includes('noindex') };
}

function mergeDirectives(a: Directives, b: Directives): Directives {
  return { noFollow: a.noFollow || b.noFollow, noIndex: a.noIndex || b.noIndex };
}
