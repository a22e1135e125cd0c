import { Agent, buildConnector, request, type Dispatcher } from 'undici';
import type { FetchResult } from '../messages.js';

/** Options of `HttpFetcher`. */
export interface HttpFetcherOptions {
  /**
   * Host-to-address map: `host` or `host:port` -> `address:port`. A mapped host is reached
   * at that address (no DNS, no proxy); the request still names the original host, so the
   * server sees an ordinary request for the real URL.
   */
  readonly hostMap?: ReadonlyMap<string, string>;
  /** Largest body read, in bytes; a larger one is cut and the page stored as oversized. Default 2 MiB. */
  readonly maxBodyBytes?: number;
  /** Time to headers and between body chunks, in ms. Default 10000. */
  readonly timeoutMs?: number;
  /** Parallel connections per origin. Default 4. */
  readonly connections?: number;
  /** User-Agent header. */
  readonly userAgent?: string;
}

/**
 * Fetches pages with undici. Never throws for a page's own faults: network errors,
 * timeouts and oversized bodies come back as a `FetchResult` with `status` (0 when there
 * was no response) and `error`, so the crawl goes on and the outcome is stored.
 */
export class HttpFetcher {
  readonly #agent: Agent;
  readonly #maxBody: number;
  readonly #timeout: number;
  readonly #userAgent: string;

  constructor(options: HttpFetcherOptions = {}) {
    this.#maxBody = options.maxBodyBytes ?? 2 * 1024 * 1024;
    this.#timeout = options.timeoutMs ?? 10_000;
    this.#userAgent = options.userAgent ?? 'shardflow/0.1 (+https://github.com/shardflow)';
    const map = options.hostMap ?? new Map<string, string>();
    const connect = buildConnector({});
    this.#agent = new Agent({
      connections: options.connections ?? 4,
      headersTimeout: this.#timeout,
      bodyTimeout: this.#timeout,
      connect: (opts, callback) => {
        const target = map.get(`${opts.hostname}:${opts.port}`) ?? map.get(opts.hostname);
        if (!target) return connect(opts, callback);
        const colon = target.lastIndexOf(':');
        return connect({ ...opts, hostname: target.slice(0, colon), host: target, port: target.slice(colon + 1), servername: opts.hostname }, callback);
      },
    });
  }

  /** Fetches `url` (canonical). `now` stamps `fetchedAt` (ms since the epoch). */
  async fetch(url: string, now: number): Promise<FetchResult> {
    let res: Dispatcher.ResponseData;
    try {
      res = await request(url, {
        dispatcher: this.#agent,
        method: 'GET',
        headers: { 'user-agent': this.#userAgent, accept: 'text/html,*/*;q=0.5' },
      });
    } catch (err) {
      return { url, status: 0, fetchedAt: now, error: `fetch failed: ${(err as Error).message}` };
    }
    const contentType = String(res.headers['content-type'] ?? '');
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of res.body) {
        size += (chunk as Buffer).length;
        if (size > this.#maxBody) {
          res.body.destroy();
          return { url, status: res.statusCode, fetchedAt: now, contentType, error: `oversized: body exceeds ${this.#maxBody} bytes` };
        }
        chunks.push(chunk as Buffer);
      }
    } catch (err) {
      return { url, status: res.statusCode, fetchedAt: now, contentType, error: `body read failed: ${(err as Error).message}` };
    }
    const ok = res.statusCode >= 200 && res.statusCode < 300;
    if (!ok) return { url, status: res.statusCode, fetchedAt: now, contentType, error: `HTTP ${res.statusCode}` };
    if (!/html/i.test(contentType)) return { url, status: res.statusCode, fetchedAt: now, contentType };
    const charset = /charset=([^;]+)/i.exec(contentType)?.[1]?.trim() ?? 'utf-8';
    let body: string;
    try {
      body = new TextDecoder(charset).decode(Buffer.concat(chunks));
    } catch {
      body = new TextDecoder('utf-8').decode(Buffer.concat(chunks));
    }
    return { url, status: res.statusCode, fetchedAt: now, contentType, body };
  }

  async close(): Promise<void> {
    await this.#agent.close();
  }
}
