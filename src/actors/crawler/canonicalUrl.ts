import { InvalidUrlError } from '../../errors.js';

/**
 * The crawler's URL canonicalisation, so that one page has one key:
 * 1. resolve against the base (the page URL or its `<base href>`) with WHATWG `URL`;
 * 2. only `http:` and `https:` are kept;
 * 3. the host is lower-cased and IDNA-encoded, the default port (80, 443) dropped, `\` read
 *    as `/`, dot segments removed, unsafe characters percent-encoded (all done by `URL`);
 * 4. the fragment is removed (it names a place in the page, not another page).
 * Query strings are kept as they are: their order can matter to a server.
 *
 * @throws InvalidUrlError when the reference does not parse or has another scheme
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
  url.hash = '';
  return url.href;
}
