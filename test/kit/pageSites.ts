import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { crawlSites, type CrawlSitesOptions, type CrawlSitesResult } from '../../src/cli/crawl.js';
import { uniformWeights } from '../../src/actors/metrics/weights.js';
import { MemoryBroker } from '../../src/runtime/brokers/memory.js';
import { QueryService } from '../../src/query/queryService.js';
import { memoryLogger, tempDir } from './datasets.js';

/** One answer of a `PageSites` server: status (default 200), headers, body. */
export interface PageAnswer {
  readonly status?: number;
  /** Default `content-type: text/html; charset=utf-8`. */
  readonly headers?: Record<string, string>;
  readonly body?: string;
  /** Answer only after this many ms (a slow page, to hold a crawl at a known point). */
  readonly delayMs?: number;
}

/**
 * Virtual hosts for crawl tests, written inline: `answers` maps `host` -> raw request
 * target (path and query exactly as the client sent them) -> answer; an unknown target
 * is a 404. Records every request target per host (`requests`) and the User-Agent of each
 * request (`userAgents`). Listens on 127.0.0.1 only.
 */
export class PageSites {
  readonly #server: Server;
  readonly requests: string[] = [];
  readonly userAgents: string[] = [];
  #port = 0;

  constructor(readonly answers: Record<string, Record<string, PageAnswer>>) {
    this.#server = createServer((req: IncomingMessage, res) => {
      const host = String(req.headers.host ?? '').toLowerCase().replace(/:\d+$/, '');
      const target = req.url ?? '/';
      this.requests.push(`${host}${target}`);
      this.userAgents.push(String(req.headers['user-agent'] ?? ''));
      const a = this.answers[host]?.[target];
      if (!a) {
        res.writeHead(404, { 'content-type': 'text/plain' });
        res.end('none');
        return;
      }
      const answer = () => {
        res.writeHead(a.status ?? 200, { 'content-type': 'text/html; charset=utf-8', ...a.headers });
        res.end(a.body ?? '');
      };
      if (a.delayMs) setTimeout(answer, a.delayMs);
      else answer();
    });
  }

  async listen(): Promise<number> {
    await new Promise<void>((ok) => this.#server.listen(0, '127.0.0.1', () => ok()));
    this.#port = (this.#server.address() as AddressInfo).port;
    return this.#port;
  }

  /** `--map` entries for every host: `host` -> `127.0.0.1:port`. */
  hostMap(): Map<string, string> {
    return new Map(Object.keys(this.answers).map((h) => [h, `127.0.0.1:${this.#port}`]));
  }

  /** How many times `host+target` was requested. */
  hits(hostAndTarget: string): number {
    return this.requests.filter((r) => r === hostAndTarget).length;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((ok) => this.#server.close(() => ok()));
  }
}

/** A crawl of `PageSites` kept open for queries; `done()` stops it and removes its data dir. */
export interface SiteCrawl {
  readonly result: CrawlSitesResult;
  readonly service: QueryService;
  readonly sites: PageSites;
  readonly dataDir: string;
  done(): Promise<void>;
}

/**
 * Crawls `answers` from `seeds` end to end (`crawlSites` with a memory broker, 2
 * partitions, no politeness delay, uniform weights unless `options` says otherwise) and
 * keeps the index open for the query API.
 */
export async function crawlPageSites(
  answers: Record<string, Record<string, PageAnswer>>,
  seeds: readonly string[],
  options: Partial<CrawlSitesOptions> = {},
): Promise<SiteCrawl> {
  const sites = new PageSites(answers);
  await sites.listen();
  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker();
  const result = await crawlSites({
    seeds, hostMap: sites.hostMap(), partitions: 2, dataDir: dir, broker, weigh: uniformWeights,
    log: memoryLogger().log, policy: { minDelayMs: 0 }, keepOpen: true, ...options,
  });
  const index = result.index!;
  const service = new QueryService({ partitioner: index.partitioner, view: (p) => index.view(p), clock: index.system.clock });
  return {
    result, service, sites, dataDir: dir,
    async done() {
      await index.stop();
      await broker.close();
      await sites.close();
      cleanup();
    },
  };
}
