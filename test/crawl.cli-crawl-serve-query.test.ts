import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot, tempDir } from './kit/datasets.js';
import { StaticSiteServer } from './kit/staticSites.js';
import { runCli, type CliRun } from './kit/cliRun.js';
import { queryPath } from '../src/cli/query.js';

const bin = join(repoRoot, 'bin/shardflow.mjs');

/** Runs `shardflow ...args` to its end, without a token in the environment unless given. */
function run(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  return runCli(args, { env: { SHARDFLOW_TOKEN: '', ...env } as Record<string, string> });
}

test('query top-pages|top-hosts|top-sites ask /v1/top/pages|hosts|sites, with --limit', () => {
  assert.equal(queryPath('top-pages', undefined, {}), '/v1/top/pages');
  assert.equal(queryPath('top-hosts', undefined, { limit: 5 }), '/v1/top/hosts?limit=5');
  assert.equal(queryPath('top-sites', undefined, { limit: 5 }), '/v1/top/sites?limit=5');
  assert.equal(queryPath('top-sites', undefined, {}), '/v1/top/sites');
  assert.throws(() => queryPath('top-site', undefined, {}), /unknown query "top-site": use page, outlinks, backlinks, host, top-pages, top-hosts, top-sites/);
});

test('npx shardflow crawl --seed --map --max-pages, then serve and query page|backlinks|host|top-hosts|top-sites', { timeout: 180_000 }, async () => {
  const { dir, cleanup } = tempDir();
  const root = join(dir, 'www');
  mkdirSync(root);
  for (let i = 0; i < 8; i++) writeFileSync(join(root, `${i}.html`), `<!doctype html><a href="/${(i + 1) % 8}.html">next</a> <a href="/0.html">home</a> <a href="http://ext.test/">out</a>`);
  writeFileSync(join(root, 'index.html'), '<a href="/0.html">start</a>');
  const server = new StaticSiteServer([{ host: 'site.test', root, robots: 'User-agent: *\nDisallow: /7.html\n' }]);
  const port = await server.listen();
  const data = join(dir, 'data');
  let serve: ReturnType<typeof spawn> | undefined;
  try {
    const bad = await run(['crawl', '--seed', 'ftp://site.test/', '--data-dir', join(dir, 'bad')]);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /no valid seed: scheme ftp: is not crawled/);
    assert.match((await run(['crawl', '--seed', 'http://site.test/', '--map', 'site.test=nowhere'])).stderr, /expected host=address:port/);

    const crawl = await run(['crawl', '--seed', 'http://site.test/index.html', '--map', `site.test=127.0.0.1:${port}`, '--delay-ms', '0', '--partitions', '2', '--data-dir', data, '--json']);
    assert.equal(crawl.code, 0, crawl.stderr);
    const summary = JSON.parse(crawl.stdout);
    assert.equal(summary.pages, 8, 'index and 0..6 (7 is disallowed)');
    assert.equal(summary.frontier.blocked, 1);
    assert.equal(summary.frontier['out-of-scope'], 1);
    // The URLs the crawl left, with why (docs/crawling.md, "When the crawl ends").
    assert.deepEqual(summary.gaps.map((g: { state: string; reason: string; urls: number; examples: string[] }) => [g.state, g.reason, g.urls, g.examples]).sort(), [
      ['blocked', 'disallowed by robots.txt', 1, ['http://site.test/7.html']],
      ['out-of-scope', 'not in scope (hosts site.test)', 1, ['http://ext.test/']],
    ]);
    assert.equal(summary.converged, true);
    assert.equal(server.requests.get('http://site.test/7.html'), undefined);

    const limited = await run(['crawl', '--seed', 'http://site.test/index.html', '--map', `site.test=127.0.0.1:${port}`, '--delay-ms', '0', '--partitions', '2', '--data-dir', join(dir, 'limited'), '--max-pages', '3', '--json', '--no-rank']);
    assert.equal(JSON.parse(limited.stdout).pages, 3);
    const spent = (JSON.parse(limited.stdout).gaps as Array<{ state: string; urls: number }>).find((g) => g.state === 'queued');
    assert.ok(spent && spent.urls > 0, `the URLs the spent budget left queued are listed: ${limited.stdout}`);

    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 't0k\n', { mode: 0o600 });
    serve = spawn(process.execPath, [bin, 'serve', '--data-dir', data, '--port', '0', '--token-file', tokenFile], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
    const api = await new Promise<string>((resolve, reject) => {
      let out = '';
      serve!.stdout!.on('data', (d) => {
        out += d;
        const m = /query API on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
        if (m) resolve(m[1]!);
      });
      serve!.on('close', (code) => reject(new Error(`serve exited ${code}`)));
    });
    const q = (...args: string[]) => run(['query', ...args, '--api', api], { SHARDFLOW_TOKEN: 't0k' });
    const page = await q('page', 'http://site.test/0.html');
    assert.equal(page.code, 0, page.stderr);
    const body = JSON.parse(page.stdout);
    assert.equal(body.url, 'http://site.test/0.html');
    assert.deepEqual(body.counts, { outlinks: 3, backlinks: 8 });
    const back = await q('backlinks', 'http://site.test/0.html', '--limit', '3');
    assert.equal(JSON.parse(back.stdout).links.length, 3);
    const host = await q('host', 'site.test');
    assert.equal(JSON.parse(host.stdout).pages, 8);
    const topHosts = await q('top-hosts', '--limit', '5');
    assert.equal(topHosts.code, 0, topHosts.stderr);
    assert.deepEqual(JSON.parse(topHosts.stdout).top.map((h: { host: string; pages: number }) => [h.host, h.pages]), [['site.test', 8]]);
    const topSites = await q('top-sites', '--limit', '5');
    assert.equal(topSites.code, 0, topSites.stderr);
    const sites = JSON.parse(topSites.stdout);
    assert.equal(sites.sites, 1);
    assert.deepEqual(sites.top.map((s: { site: string; hosts: number; pages: number }) => [s.site, s.hosts, s.pages]), [['site.test', 1, 8]]);
    assert.match((await q('top-sites', '--offset', '1')).stderr, /--offset applies to outlinks and backlinks only, not to query top-sites/);
    const missing = await q('page', 'http://site.test/nothing.html');
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /404: no page stored for http:\/\/site\.test\/nothing\.html/);
    const invalid = await q('page', 'mailto:x@y.z');
    assert.equal(invalid.code, 2);
    assert.match(invalid.stderr, /400: scheme mailto: is not crawled/);
    const unauthorized = await run(['query', 'page', 'http://site.test/0.html', '--api', api]);
    assert.equal(unauthorized.code, 2);
    assert.match(unauthorized.stderr, /401/);
    const down = await run(['query', 'page', 'http://site.test/0.html', '--api', 'http://127.0.0.1:1']);
    assert.equal(down.code, 3);
  } finally {
    if (serve && serve.exitCode === null) {
      const closed = new Promise((ok) => serve!.once('close', ok));
      serve.kill('SIGTERM');
      await closed;
    }
    await server.close();
    cleanup();
  }
});
