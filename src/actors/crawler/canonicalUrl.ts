import { InvalidUrlError } from '../../index.js';

/**
 * The crawler's URL canonicalisation, so that one page has one key. Every URL that enters
 * the index (seeds, hrefs, `<base href>`, `rel=canonical`, redirect targets) goes through it.
 *
 * Rules, in order:
 * 1. resolve the reference against the base (the page URL, or its `<base href>`) with the
 *    WHATWG URL parser, as it is: the parser itself strips what the URL Standard says
 *    (https://url.spec.whatwg.org/#concept-basic-url-parser: leading and trailing C0
 *    controls and U+0020, ASCII tab and newline anywhere) and percent-encodes what it keeps,
 *    so a decoded `&nbsp;` (U+00A0) or a U+FEFF at the start of an href is part of the path
 *    (`%C2%A0`, `%EF%BB%BF`), never stripped (`String.prototype.trim` would strip every
 *    Unicode space and resolve such an href to another URL);
 * 2. only `http:` and `https:` are kept (`mailto:`, `javascript:`, `file:`, `ftp:` are refused);
 * 3. the URL needs a host; user names and passwords in it are refused (a crawler never
 *    sends credentials it found in a page);
 * 4. done by the parser: scheme and host lower-cased, the host IDNA-encoded (punycode),
 *    IPv4 shorthand expanded (`http://0x7f.1/` is `http://127.0.0.1/`), the default port
 *    (80 for http, 443 for https) dropped, `\` read as `/`, dot segments (`/a/./b/../c`)
 *    removed, an empty path made `/`, unsafe characters percent-encoded;
 * 5. a trailing dot of the host is removed (`example.com.` is `example.com`);
 * 6. the fragment is removed (it names a place in the page, not another page);
 * 7. an empty query (`/a?`) is removed; other query strings keep their order (order can
 *    matter to a server);
 * 8. percent-encoding is normalised as RFC 3986 section 6.2.2 says, in the path and the query
 *    (`normalizePercentEncoding`): an escape of an unreserved character (ALPHA, DIGIT, `-`,
 *    `.`, `_`, `~`; section 2.3) is decoded (section 6.2.2.2), the hex digits of every other
 *    escape are upper-cased (section 6.2.2.1), a reserved character is never decoded. So
 *    `/~a`, `/%7Ea` and `/%7ea` are one page; `/a%2Fb` and `/a/b` stay two. Scheme and host
 *    case (6.2.2.1), dot segments (6.2.2.3), the default port and the empty path (6.2.3)
 *    come from the WHATWG parser (steps 4-5).
 *
 * The result is the key of a page in `pages`, `outlinks`, `backlinks` and `ranks`; a data
 * dir written with another form of the key is refused (`URL_KEY_FORM`).
 *
 * @param reference an absolute URL, or a relative one when `base` is given
 * @param base an absolute URL to resolve `reference` against
 * @returns the canonical absolute URL (`URL.href` form)
 * @throws InvalidUrlError when the reference does not parse, has another scheme, has no
 *   host or carries credentials
 */
export function canonicalUrl(reference: string, base?: string): string {
  let url: URL;
  try {
    url = new URL(reference, base);
  } catch (cause) {
    throw new InvalidUrlError(reference, 'URL does not parse', { cause });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new InvalidUrlError(reference, `scheme ${url.protocol} is not crawled`);
  if (url.hostname === '') throw new InvalidUrlError(reference, 'URL has no host');
  if (url.username !== '' || url.password !== '') throw new InvalidUrlError(reference, 'URL carries credentials');
  if (url.hostname.endsWith('.') && url.hostname.length > 1) url.hostname = url.hostname.slice(0, -1);
  const search = url.search === '?' || url.search === '' ? '' : normalizePercentEncoding(url.search);
  return `${url.protocol}//${url.host}${normalizePercentEncoding(url.pathname)}${search}`;
}

/**
 * The form of the page key `canonicalUrl` returns, recorded in a data dir
 * (`DataDirRecord.urlKey`): a data dir that holds pages keyed by another form (written
 * before RFC 3986 section 6.2.2 percent-encoding normalisation, when `%7E` and `~` were two
 * pages) is refused, never read with keys that would split a page in two.
 */
export const URL_KEY_FORM = 'whatwg+rfc3986-6.2.2/1';

const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

/**
 * RFC 3986 section 6.2.2.1 and 6.2.2.2 on a URL component: `%XX` escapes of unreserved
 * characters (section 2.3: ALPHA, DIGIT, `-`, `.`, `_`, `~`) are decoded, the hex digits of
 * the other escapes upper-cased; a `%` not followed by two hex digits is left as it is.
 * @param component a path, query or whole URL (already in WHATWG serialised form)
 * @returns the component with its escapes normalised
 */
export function normalizePercentEncoding(component: string): string {
  if (!component.includes('%')) return component;
  return component.replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) => {
    const c = String.fromCharCode(parseInt(hex, 16));
    return UNRESERVED.test(c) ? c : `%${hex.toUpperCase()}`;
  });
}
