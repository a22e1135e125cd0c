import { Parser } from 'htmlparser2';
import type { LinkFeatures, Outlink } from '../messages.js';
import { canonicalUrl } from './canonicalUrl.js';
import { hostOf } from '../../runtime/partitioner.js';

/** What `extractLinks` found in a page. */
export interface ExtractedLinks {
  /** One entry per distinct target, in document order; the first occurrence's features win. */
  readonly outlinks: Outlink[];
  /** hrefs that were skipped, with why (does not parse, other scheme). */
  readonly rejected: Array<{ href: string; reason: string }>;
  /** End tags the parser had to imply: > 0 means the HTML was not well-formed. */
  readonly impliedEndTags: number;
  /** `<meta name="robots" content="nofollow">` was present. */
  readonly noFollow: boolean;
}

const REL_TOKENS = new Set(['nofollow', 'ugc', 'sponsored']);
const MAX_ANCHOR = 256;

/**
 * Extracts the outlinks of an HTML page with htmlparser2 (forgiving: malformed HTML still
 * yields its links, and `impliedEndTags` says how malformed it was). Honours `<base href>`;
 * records per link its anchor text, position, rel tokens, same-host flag and whether it
 * sits in `<nav>` or `<footer>`.
 *
 * @param html the decoded body
 * @param pageUrl the canonical URL of the page (the base for relative links)
 */
export function extractLinks(html: string, pageUrl: string): ExtractedLinks {
  let base = pageUrl;
  const pageHost = hostOf(pageUrl);
  const raw: Array<{ target: string; anchor: string; rel: string[]; region: LinkFeatures['region'] }> = [];
  const rejected: ExtractedLinks['rejected'] = [];
  let impliedEndTags = 0;
  let noFollow = false;
  let nav = 0;
  let footer = 0;
  let open: { target: string; anchor: string; rel: string[]; region: LinkFeatures['region'] } | undefined;

  const parser = new Parser(
    {
      onopentag(name, attrs) {
        if (name === 'nav') nav++;
        else if (name === 'footer') footer++;
        else if (name === 'base' && attrs.href) {
          try {
            base = canonicalUrl(attrs.href, pageUrl);
          } catch (err) {
            rejected.push({ href: attrs.href, reason: (err as Error).message });
          }
        } else if (name === 'meta' && attrs.name?.toLowerCase() === 'robots' && /nofollow|none/i.test(attrs.content ?? '')) {
          noFollow = true;
        } else if (name === 'a' && attrs.href !== undefined) {
          let target: string;
          try {
            target = canonicalUrl(attrs.href.trim(), base);
          } catch (err) {
            rejected.push({ href: attrs.href, reason: (err as Error).message });
            return;
          }
          const rel = (attrs.rel ?? '').toLowerCase().split(/\s+/).filter((t) => REL_TOKENS.has(t));
          open = { target, anchor: '', rel, region: nav > 0 ? 'nav' : footer > 0 ? 'footer' : 'body' };
          raw.push(open);
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

  const seen = new Set<string>();
  const outlinks: Outlink[] = [];
  raw.forEach((l, i) => {
    if (seen.has(l.target)) return;
    seen.add(l.target);
    let sameHost = false;
    try {
      sameHost = hostOf(l.target) === pageHost;
    } catch {
      sameHost = false;
    }
    outlinks.push({
      target: l.target,
      features: {
        anchor: l.anchor.replace(/\s+/g, ' ').trim().slice(0, MAX_ANCHOR),
        position: raw.length > 0 ? i / raw.length : 0,
        rel: noFollow && !l.rel.includes('nofollow') ? [...l.rel, 'nofollow'] : l.rel,
        sameHost,
        region: l.region,
      },
    });
  });
  return { outlinks, rejected, impliedEndTags, noFollow };
}
