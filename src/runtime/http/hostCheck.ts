import { isIP } from 'node:net';
import { InvalidArgumentError } from '../../errors.js';

/**
 * The `Host` header check of shardflow's HTTP endpoints (the inspection endpoint, the query
 * API): it stops DNS rebinding, where a web page on `attacker.example` makes its name resolve
 * to 127.0.0.1 (or to a private address) and then reads the endpoint from the victim's browser
 * as a same-origin request. Such a request always carries the attacker's *name* in its `Host`
 * header, so a server that answers only to the names it expects cannot be read that way.
 * Background: https://en.wikipedia.org/wiki/DNS_rebinding; the same rule (loopback names, IP
 * literals, the configured name, an allow-list) is webpack-dev-server's `allowedHosts: 'auto'`
 * and Vite's `server.allowedHosts`.
 */

/** Options of {@link hostHeaderCheck}. */
export interface HostCheckOptions {
  /** The address or name the server is bound to (`127.0.0.1`, `0.0.0.0`, `::`, `index.internal`, ...). */
  readonly bindHost: string;
  /**
   * Further host names to answer to, case-insensitive, without port: `index.example.org`
   * matches that name only, `.example.org` that name and every name under it. Default none.
   */
  readonly allowedHosts?: readonly string[];
}

/**
 * A `Host` header check: returns `undefined` when a request with that header may be answered,
 * else the reason it is refused (one sentence, for a 403 answer). A header names an allowed host
 * when its name (port ignored) is:
 *
 * - a loopback name (`localhost`, `*.localhost`, `127.x.x.x`, `::1`), always;
 * - in `allowedHosts`;
 * - when `bindHost` is not a loopback address: `bindHost` itself (unless it is a wildcard,
 *   `0.0.0.0` or `::`), or any IP literal (DNS rebinding needs a name; a client that connects
 *   by address sends the address).
 *
 * A missing or malformed header is refused.
 * @throws InvalidArgumentError when an `allowedHosts` entry is not a host name
 */
export function hostHeaderCheck(options: HostCheckOptions): (header: string | undefined) => string | undefined {
  const allowed = (options.allowedHosts ?? []).map((h) => {
    const name = h.trim().toLowerCase();
    if (!/^\.?[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?$/.test(name) && isIP(name.replace(/^\[(.*)\]$/, '$1')) === 0) {
      throw new InvalidArgumentError(`allowed host ${JSON.stringify(h)} is not a host name (e.g. index.example.org or .example.org, no port)`);
    }
    return name.replace(/^\[(.*)\]$/, '$1');
  });
  const bind = options.bindHost.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  const loopbackBind = isLoopbackName(bind);
  const names = ['loopback names', ...(loopbackBind || isWildcardAddress(bind) ? [] : [bind]), ...(loopbackBind ? [] : ['IP addresses']), ...allowed];
  return (header) => {
    const name = hostnameOf(header);
    if (name === '') return header === undefined || header === '' ? 'the request has no Host header' : `malformed Host header ${JSON.stringify(header)}`;
    if (isLoopbackName(name)) return undefined;
    if (allowed.some((a) => (a.startsWith('.') ? name === a.slice(1) || name.endsWith(a) : name === a))) return undefined;
    if (!loopbackBind && (name === bind || isIP(name) !== 0)) return undefined;
    return `host ${JSON.stringify(name)} is not allowed (DNS rebinding protection): this server answers to ${names.join(', ')}`;
  };
}

/** The host name of a `Host` header (`127.0.0.1:9464` -> `127.0.0.1`, `[::1]:80` -> `::1`, lower-case), or `''` when missing or malformed. */
export function hostnameOf(header: string | undefined): string {
  if (header === undefined || header === '') return '';
  try {
    const url = new URL(`http://${header}`);
    // `Host` is host[:port] only: anything else (userinfo, a path) is malformed.
    if (url.username !== '' || url.password !== '' || url.pathname !== '/' || url.search !== '' || url.hash !== '' || /[/?#@\\]/.test(header)) return '';
    return url.hostname.replace(/^\[(.*)\]$/, '$1');
  } catch {
    return ''; // a malformed Host header names no host: the request is refused
  }
}

/** `localhost`, `*.localhost` (RFC 6761 §6.3), an address in 127.0.0.0/8, or `::1`. */
export function isLoopbackName(name: string): boolean {
  const n = name.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  if (n === 'localhost' || n.endsWith('.localhost')) return true;
  if (isIP(n) === 4) return n.startsWith('127.');
  return n === '::1' || n === '0:0:0:0:0:0:0:1';
}

/** `0.0.0.0` or `::` (every interface). */
export function isWildcardAddress(host: string): boolean {
  const n = host.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  return n === '0.0.0.0' || n === '::' || n === '0:0:0:0:0:0:0:0';
}
