import { createReadStream, promises as fs } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, resolve, sep } from 'node:path';

/** One virtual host: its files, and the robots.txt it answers (404 when absent). */
export interface StaticSite {
  readonly host: string;
  readonly root: string;
  readonly robots?: string;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8', '.htm': 'text/html; charset=utf-8', '.css': 'text/css',
  '.js': 'text/javascript', '.txt': 'text/plain; charset=utf-8', '.png': 'image/png', '.svg': 'image/svg+xml',
  '.gif': 'image/gif', '.jpg': 'image/jpeg', '.json': 'application/json', '.zip': 'application/zip', '.pdf': 'application/pdf',
};

/**
 * A static file server for tests: virtual hosts by the Host header, each serving a folder
 * (symlinks followed, `dir/` serves `dir/index.html`, no redirects, query strings ignored
 * for the file lookup), `/robots.txt` from the site's text. Counts every request by URL
 * (`http://host/path?query`, as WHATWG URL prints it) so a test can check what a crawler
 * fetched and how often. Listens on 127.0.0.1 only.
 */
export class StaticSiteServer {
  readonly #server: Server;
  readonly #sites: Map<string, StaticSite>;
  /** Requests per URL. */
  readonly requests = new Map<string, number>();
  /** Files served, by URL, with their status. */
  readonly statuses = new Map<string, number>();
  /** URLs answered with this status (and an empty HTML body) instead of their file. */
  readonly overrides = new Map<string, number>();

  constructor(sites: readonly StaticSite[]) {
    this.#sites = new Map(sites.map((s) => [s.host.toLowerCase(), { ...s, root: resolve(s.root) }]));
    this.#server = createServer((req, res) => {
      const host = String(req.headers.host ?? '').toLowerCase().replace(/:\d+$/, '');
      const url = new URL(req.url ?? '/', `http://${host}`).href;
      this.requests.set(url, (this.requests.get(url) ?? 0) + 1);
      const answer = (status: number, type: string, body: string) => {
        this.statuses.set(url, status);
        res.writeHead(status, { 'content-type': type });
        res.end(body);
      };
      const site = this.#sites.get(host);
      if (!site) return answer(404, 'text/plain', 'unknown host');
      const override = this.overrides.get(url);
      if (override !== undefined) return answer(override, 'text/html; charset=utf-8', '<!doctype html><title>gone</title>');
      const path = new URL(url).pathname;
      if (path === '/robots.txt') return site.robots === undefined ? answer(404, 'text/plain', 'no robots.txt') : answer(200, 'text/plain; charset=utf-8', site.robots);
      this.#file(site, path).then(
        async (file) => {
          if (!file) return answer(404, 'text/html; charset=utf-8', '<!doctype html><title>404</title>');
          this.statuses.set(url, 200);
          res.writeHead(200, { 'content-type': TYPES[extname(file).toLowerCase()] ?? 'application/octet-stream' });
          createReadStream(file).on('error', () => res.destroy()).pipe(res);
        },
        () => answer(500, 'text/plain', 'error'),
      );
    });
  }

  /** The file a path names under the site's root, or undefined. */
  async #file(site: StaticSite, path: string): Promise<string | undefined> {
    let decoded: string;
    try {
      decoded = decodeURIComponent(path);
    } catch {
      return undefined;
    }
    let file = resolve(site.root, `.${decoded}`);
    if (file !== site.root && !file.startsWith(site.root + sep)) return undefined;
    try {
      let st = await fs.stat(file);
      if (st.isDirectory()) {
        if (!path.endsWith('/')) return undefined;
        file = resolve(file, 'index.html');
        st = await fs.stat(file);
      }
      return st.isFile() ? file : undefined;
    } catch {
      return undefined;
    }
  }

  /** Starts listening on 127.0.0.1 (any free port). @returns the port */
  async listen(): Promise<number> {
    await new Promise<void>((ok, fail) => {
      this.#server.once('error', fail);
      this.#server.listen(0, '127.0.0.1', () => ok());
    });
    return (this.#server.address() as AddressInfo).port;
  }

  /** Host-to-address map sending every site to this server. */
  hostMap(port: number): Map<string, string> {
    return new Map([...this.#sites.keys()].map((h) => [h, `127.0.0.1:${port}`]));
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((ok) => this.#server.close(() => ok()));
  }
}
