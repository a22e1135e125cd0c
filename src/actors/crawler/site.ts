import { getDomain } from 'tldts';

/**
 * The site of a host: its registrable domain (URL Standard, "host" section,
 * https://url.spec.whatwg.org/#host-registrable-domain), the public suffix plus one label,
 * from the Public Suffix List (https://publicsuffix.org/) as tldts ships it, with its
 * private section (`github.io`, `blogspot.com`: each user's host is a site of its own, as
 * browsers count sites). A host without a registrable domain (an IP address, `localhost`, a
 * public suffix itself) is its own site. A name outside the list (`site.test`) falls under
 * the list's default rule `*`: its registrable domain is its last two labels.
 * @param host a canonical host (lower case, punycode, as `hostOf` gives)
 * @returns e.g. `example.co.uk` for `www.a.example.co.uk`
 */
export function siteOf(host: string): string {
  return getDomain(host, { allowPrivateDomains: true }) ?? host;
}

/** True when two canonical hosts are of the same site (`siteOf`). */
export function sameSite(a: string, b: string): boolean {
  return a === b || siteOf(a) === siteOf(b);
}
