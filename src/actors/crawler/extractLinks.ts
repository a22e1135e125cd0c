import { Parser } from 'htmlparser2';
import type { LinkFeatures, Outlink } from '../messages.js';
import { canonicalUrl } from './canonicalUrl.js';
import { hostOf } from '../../runtime/partitioner.js';

/** What `extractLinks` found in a page. */
export interface ExtractedLinks {
  /**
   * One entry per distinct target, in document order (the first occurrence's features win),
   * then the `rel=canonical` target when it differs from the page. Empty when the page says
   * `nofollow` (see `noFollow`).
   */
  readonly outlinks: Outlink[];
  /** hrefs that were skipped, with why (does not parse, other scheme, credentials). */
  readonly rejected: Array<{ href: string; reason: string }>;
  /** End tags the parser had to imply: > 0 means the HTML was not well-formed. */
  readonly impliedEndTags: number;
  /** `<meta name="robots">` said `nofollow` or `none`: the page's links are not followed. */
  readonly noFollow: boolean;
  /** `<meta name="robots">` said `noindex` or `none`: the page's content is not indexed. */
  readonly noIndex: boolean;
  /** Links left out because of `noFollow` (before de-duplication). */
  readonly notFollowed: number;
  /** The canonical URL of `<link rel="canonical" href>`, when present and valid. */
  readonly canonical?: string;
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
}

const REL_TOKENS = new Set(['nofollow', 'ugc', 'sponsored']);
const MAX_ANCHOR = 256;

/**
 * Extracts the outlinks of an HTML page with htmlparser2 (forgiving: malformed HTML still
 * yields its links, and `impliedEndTags` says how malformed it was). Records per link its
 * anchor text, position, rel tokens, same-host flag and whether it sits in `<nav>` or
 * `<footer>`.
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
 * - `rel` tokens kept are `nofollow`, `ugc`, `sponsored` (they lower a link's weight).
 *
 * @param html the decoded body
 * @param pageUrl the canonical URL of the page (the base for relative links)
 */
export function extractLinks(html: string, pageUrl: string, options: ExtractLinksOptions = {}): ExtractedLinks {
  let base = pageUrl;
  let baseSeen = false;
  const token = (options.userAgentToken ?? 'shardflow').toLowerCase();
  const pageHost = hostOf(pageUrl);
  const raw: Array<{ target: string; anchor: string; rel: string[]; region: LinkFeatures['region'] }> = [];
  const rejected: ExtractedLinks['rejected'] = [];
  let impliedEndTags = 0;
  let directives = parseDirectives(options.robotsDirectives ?? '');
  let canonicalHref: string | undefined;
  let nav = 0;
  let footer = 0;
  let open: { target: string; anchor: string; rel: string[]; region: LinkFeatures['region'] } | undefined;

  const parser = new Parser(
    {
      onopentag(name, attrs) {
        if (name === 'nav') nav++;
        else if (name === 'footer') footer++;
        else if (name === 'base' && attrs.href !== undefined && !baseSeen) {
          baseSeen = true;
          try {
            base = canonicalUrl(attrs.href, pageUrl);
          } catch (err) {
            rejected.push({ href: attrs.href, reason: (err as Error).message });
          }
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
          const rel = (attrs.rel ?? '').toLowerCase().split(/\s+/).filter((t) => REL_TOKENS.has(t));
          const link = { target, anchor: name === 'area' ? (attrs.alt ?? '') : '', rel, region: nav > 0 ? 'nav' as const : footer > 0 ? 'footer' as const : 'body' as const };
          raw.push(link);
          if (name === 'a') open = link;
        }
      },
      ontext(text) {
        if (open && open.anchor.length < MAX_ANCHOR) open.anchor += text;
      },
      onclosetag(name, isImplied) {
        if (isImplied) impliedEndTags++;
        if (name === 'a') open = undefined;
        else if (name === 'nav' && nav > 0) nav--;
        else if (name === 'footer' && footer > 0) footer--;
      },
    },
    { decodeEntities: true, lowerCaseTags: true, lowerCaseAttributeNames: true },
  );
  parser.write(html);
  parser.end();

  let canonical: string | undefined;
  if (canonicalHref !== undefined) {
    try {
      canonical = canonicalUrl(canonicalHref, base);
    } catch (err) {
      rejected.push({ href: canonicalHref, reason: (err as Error).message });
    }
  }

  const seen = new Set<string>();
  const outlinks: Outlink[] = [];
  const sameHostAs = (target: string) => {
    try {
      return hostOf(target) === pageHost;
    } catch {
      return false;
    }
  };
  if (!directives.noFollow) {
    raw.forEach((l, i) => {
      if (seen.has(l.target)) return;
      seen.add(l.target);
      outlinks.push({
        target: l.target,
        features: {
          anchor: l.anchor.replace(/\s+/g, ' ').trim().slice(0, MAX_ANCHOR),
          position: raw.length > 0 ? i / raw.length : 0,
          rel: l.rel,
          sameHost: sameHostAs(l.target),
          region: l.region,
        },
      });
    });
  }
  if (canonical !== undefined && canonical !== pageUrl && !seen.has(canonical)) {
    outlinks.push({ target: canonical, features: { anchor: '', position: 0, rel: ['canonical'], sameHost: sameHostAs(canonical), region: 'body' } });
  }
  return {
    outlinks,
    rejected,
    impliedEndTags,
    noFollow: directives.noFollow,
    noIndex: directives.noIndex,
    notFollowed: directives.noFollow ? raw.length : 0,
    ...(canonical !== undefined ? { canonical } : {}),
  };
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
