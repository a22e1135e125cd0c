import type { LinkFeatures } from '../messages.js';
import type { PageRecord } from './schema.js';
import { linkFeatures } from '../indexer/linkValue.js';

/**
 * Redirects in the link graph (docs/crawling.md, "Redirects and aliases").
 *
 * A 3xx answer is stored as a page whose one outlink is its `Location`, with
 * `LinkFeatures.redirect` set to the status (only the fetcher sets it: no HTML attribute
 * can). Such a page passes on its rank *undamped*: pushing it sends r w_pq (not d r w_pq) to
 * its target, as a reader sent to it is sent on at once, with no chance to stop or jump
 * elsewhere (Google's Gary Illyes, 2016: "30x redirects don't lose PageRank anymore"). A
 * permanent one (301, 308: RFC 9110 sections 15.4.2 and 15.4.9, "any future references to
 * this resource ought to use one of the enclosed URIs"; Google Search Central, "Redirects
 * and Google Search", takes it as a strong signal that the target is canonical) is moreover an
 * *alias* of its target: no teleport of its own (t = 0) and no score (left out of scores,
 * totals, hosts), so its links count exactly as links to the target. A temporary one (302,
 * 303, 307: the request URI stays the one to use) stays a page: teleport 1 - d, scored.
 */

/** Statuses of a permanent redirect: 301 Moved Permanently, 308 Permanent Redirect (RFC 9110 sections 15.4.2, 15.4.9). */
export const PERMANENT_REDIRECTS: ReadonlySet<number> = new Set([301, 308]);

/** True for 301 and 308 (see PERMANENT_REDIRECTS). */
export function isPermanentRedirect(status: number): boolean {
  return PERMANENT_REDIRECTS.has(status);
}

/**
 * True when a page with these outlinks passes its rank on undamped: exactly one outlink,
 * a redirect's `Location` (`features.redirect` set).
 */
export function passesUndamped(links: Iterable<LinkFeatures>): boolean {
  let n = 0;
  let redirect = false;
  for (const f of links) {
    if (++n > 1) return false;
    redirect = f.redirect !== undefined;
  }
  return redirect;
}

/** The factor a page's pushed residual is multiplied by: 1 for a page that `passesUndamped`, else `damping`. */
export function pageDamping(links: Iterable<LinkFeatures>, damping: number): number {
  return passesUndamped(links) ? 1 : damping;
}

/**
 * The teleport residual t_p a stored page contributes: 0 for a deleted page or an alias
 * (`aliasOf`), `teleport` (1 - d) for any other page.
 */
export function teleportOf(record: PageRecord | undefined, teleport: number): number {
  return record === undefined || record.deleted || record.aliasOf !== undefined ? 0 : teleport;
}

/** True when the page counts in the page counter and in scores: stored, not deleted, not an alias. */
export function isScoredPage(record: PageRecord | undefined): boolean {
  return record !== undefined && !record.deleted && record.aliasOf === undefined;
}

const REDIRECT_BYTES = Buffer.from('redirect', 'utf8');

/**
 * The redirect status of a stored link value (linkValue.ts: `LinkFeatures.redirect`), or
 * undefined for an ordinary link. The features are decoded only when their bytes hold
 * `redirect` (a redirect's link always does), so scans decode no other link.
 */
export function redirectOfLinkValue(value: Uint8Array): number | undefined {
  const bytes = Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength); // a Uint8Array from a remote view
  return bytes.includes(REDIRECT_BYTES, 8) ? linkFeatures(bytes).redirect : undefined;
}

/** `passesUndamped` for a page whose only outlink has the stored link value `value`. */
export function undampedLinkValue(value: Uint8Array): boolean {
  return redirectOfLinkValue(value) !== undefined;
}

const ALIAS_BYTES = Buffer.from('aliasOf', 'utf8');

/** True when a packed `PageRecord` (msgpack) is an alias's; unpacks only a record whose bytes hold `aliasOf`. */
export function isAliasRecordValue(value: Buffer, unpack: (v: Buffer) => PageRecord): boolean {
  return value.includes(ALIAS_BYTES) && unpack(value).aliasOf !== undefined;
}
