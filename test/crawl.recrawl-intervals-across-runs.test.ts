import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { crawlSites, type CrawlSitesOptions } from '../src/cli/crawl.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { QueryService } from '../src/query/queryService.js';
import { memoryLogger, tempDir } from './kit/datasets.js';
import { StaticSiteServer } from './kit/staticSites.js';

const A = 'http://a.test';

function writeSite(root: string, pages: Record<string, string[]>): void {
  mkdirSync(root, { recursive: true });
  for (const [name, links] of Object.entries(pages)) {
    writeFileSync(join(root, name), `<!doctype html><title>${name}</title>${links.map((l) => `<a href="${l}">${l}</a>`).join(' ')}`);
  }
}

// Found by an operator: after a site changed, the same crawl command on its data dir fetched
// nothing, with any --recrawl-hours: a page's next fetch was fixed when it was fetched (a week
// by default). `--recrawl` makes every page fetched before the run due at once.
test('--recrawl (recrawlFetchedBefore) refetches once every page earlier runs fetched; a run without it fetches nothing not due', { timeout: 180_000 }, async () => {
  const { dir, cleanup } = tempDir();
  const root = join(dir, 'www');
  writeSite(root, { 'index.html': ['p1.html', 'p2.html'], 'p1.html': ['p2.html'], 'p2.html': [] });
  const server = new StaticSiteServer([{ host: 'a.test', root }]);
  const port = await server.listen();
  const crawl = (policy: CrawlSitesOptions['policy'], keepOpen = false) => crawlSites({
    seeds: [`${A}/index.html`], hostMap: server.hostMap(port), partitions: 2, dataDir: join(dir, 'data'),
    broker: new MemoryBroker(), weigh: uniformWeights, log: memoryLogger().log, policy: { minDelayMs: 0, ...policy }, keepOpen,
  });
  const fetches = () => [...server.requests].filter(([u]) => !u.endsWith('/robots.txt')).reduce((n, [, c]) => n + c, 0);
  try {
    const first = await crawl({});
    assert.equal(first.pages, 3);
    assert.equal(fetches(), 3);
    // The site changes: p1 links to a new page p3 instead of p2.
    writeSite(root, { 'p1.html': ['p3.html'], 'p3.html': [] });
    await crawl({});
    assert.equal(fetches(), 3, 'the default interval (a week): nothing is due, nothing fetched');
    const again = await crawl({ recrawlFetchedBefore: Date.now() }, true);
    const index = again.index!;
    try {
      assert.equal(fetches(), 3 + 4, 'the three pages fetched again, and the new one');
      const service = new QueryService({ partitioner: index.partitioner, view: (p) => index.view(p), clock: index.system.clock });
      const out = await service.outlinks(`${A}/p1.html`);
      assert.ok(out.found);
      assert.deepEqual(out.body.links.map((l) => l.url), [`${A}/p3.html`], 'p1\'s outlinks are the changed page\'s');
      const page = await service.page(`${A}/p3.html`);
      assert.ok(page.found && page.body.status === 200);
    } finally {
      await index.stop();
    }
  } finally {
    await server.close();
    cleanup();
  }
});
