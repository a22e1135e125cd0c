import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { WebGraph } from './graphFile.js';
import { normalizePercentEncoding } from '../actors/crawler/canonicalUrl.js';

/** A page the replay server answers with something other than the graph's HTML. */
export interface ReplayOverride {
  readonly status: number;
  readonly contentType?: string;
  readonly body: string | Buffer;
}

/**
 * Serves a web graph as HTML over HTTP, for crawling it as if it were the web: every page
 * is `<a href>` per distinct outlink, with the graph's own URLs. A target listed twice in the
 * graph file is one link: the reference ranks shipped with the graphs treat them as simple
 * graphs (networkx's DiGraph), and the crawler sums repeated anchors into one edge's weight
 * (the reasonable surfer), so serving a duplicate twice would give that edge twice the weight.
 * Virtual hosts: the page is found from the request's Host header and path, so one
 * listening port serves every host of the graph through the crawler's host-to-address map.
 *
 * Page URLs are matched after WHATWG `URL` normalisation without the fragment (the form a
 * crawler requests);
 * unknown URLs answer 404. `overrides` answer chosen URLs with any status and body (tests
 * use it for 404, 500, malformed and oversized pages).
 */
export class ReplayServer {
  readonly #server: Server;
  readonly #pages = new Map<string, string>();
  readonly overrides = new Map<string, ReplayOverride>();
  /** Requests answered, by status. */
  readonly served = new Map<number, number>();
  /** Hears every graph page answered 200, with its graph URL (tests pick pages a crawl fetched). */
  onPageServed: ((url: string) => void) | undefined;

  constructor(readonly graph: WebGraph) {
    for (const url of graph.pages) {
      let key = url;
      try {
        const u = new URL(url);
        u.hash = ''; // a client never sends the fragment: `...?a=1&#38;b=2` is requested as `...?a=1&`
        key = normalizePercentEncoding(u.href); // as the crawler requests it (canonicalUrl): %7E is ~
      } catch {
        // not a URL a crawler can request: never served
      }
      if (!this.#pages.has(key)) this.#pages.set(key, url);
    }
    this.#server = createServer((req, res) => {
      const url = normalise(`http://${req.headers.host ?? 'unknown'}${req.url ?? '/'}`);
      const override = this.overrides.get(url);
      if (override) {
        this.#count(override.status);
        res.writeHead(override.status, { 'content-type': override.contentType ?? 'text/html; charset=utf-8' });
        res.end(override.body);
        return;
      }
      const page = this.#pages.get(url);
      if (page === undefined) {
        this.#count(404);
        res.writeHead(404, { 'content-type': 'text/html; charset=utf-8' });
        res.end('<!doctype html><title>404</title><p>not in the graph</p>');
        return;
      }
      this.#count(200);
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(this.html(page));
      this.onPageServed?.(page);
    });
  }

  /** The HTML of a graph page: title, then one link per distinct outlink, in file order. */
  html(page: string): string {
    const out = [...new Set(this.graph.links.get(page) ?? [])];
    const items = out.map((t, i) => `<li><a href="${escapeAttr(t)}">link ${i + 1}</a></li>`).join('\n');
    return `<!doctype html>\n<html><head><meta charset="utf-8"><title>${escapeText(page)}</title></head>\n<body><h1>${escapeText(page)}</h1>\n<ul>\n${items}\n</ul></body></html>\n`;
  }

  /** Starts listening on 127.0.0.1 (port 0: any free port). @returns the port */
  async listen(port = 0): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(port, '127.0.0.1', () => resolve());
    });
    return (this.#server.address() as AddressInfo).port;
  }

  /** Host-to-address map sending every host of the graph to this server. */
  hostMap(port: number): Map<string, string> {
    const map = new Map<string, string>();
    for (const key of this.#pages.keys()) {
      try {
        const u = new URL(key);
        map.set(u.hostname, `127.0.0.1:${port}`);
      } catch {
        // unparseable: never requested
      }
    }
    return map;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #count(status: number): void {
    this.served.set(status, (this.served.get(status) ?? 0) + 1);
  }
}

/** A requested URL as the WHATWG parser prints it, percent-encoding normalised (RFC 3986 section 6.2.2). */
function normalise(url: string): string {
  try {
    return normalizePercentEncoding(new URL(url).href);
  } catch {
    return url;
  }
}

function escapeAttr(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
}

function escapeText(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
}
