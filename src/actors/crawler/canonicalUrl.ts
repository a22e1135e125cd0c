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
 * 7. an empty query (`/a?`) is removed; other query strings are kept byte for byte, in
 *    their order (order can matter to a server), and so are percent-escapes (`%7E` and
 *    `~` stay distinct: a server may tell them apart).
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
  url.hash = '';
  if (url.search === '' && url.href.endsWith('?')) url.search = '';
  return url.href.endsWith('?') ? url.href.slice(0, -1) : url.href;
}
