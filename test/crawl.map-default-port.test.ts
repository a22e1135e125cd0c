import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { PageSites } from './kit/pageSites.js';
import { runCli } from './kit/cliRun.js';
import { tempDir } from './kit/datasets.js';

// `--map tls.test:443=...` names the port https://tls.test/ uses (its default port, which
// the WHATWG URL serialises as no port at all); `--map plain.test:80=...` likewise for http.
test('--map host:443 and host:80 entries map URLs on the default port', { timeout: 180_000 }, async () => {
  const { dir, cleanup } = tempDir();
  const key = join(dir, 'key.pem');
  const cert = join(dir, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=tls.test', '-addext', 'subjectAltName=DNS:tls.test'], { stdio: 'ignore' });
  const tls = createHttpsServer({ key: readFileSync(key), cert: readFileSync(cert) }, (req, res) => {
    const body = req.url === '/' ? '<a href="/b.html">b</a> <a href="http://plain.test/">plain</a>' : req.url === '/b.html' ? 'b' : undefined;
    res.writeHead(body === undefined ? 404 : 200, { 'content-type': 'text/html' });
    res.end(body ?? 'none');
  });
  await new Promise<void>((ok) => tls.listen(0, '127.0.0.1', () => ok()));
  const tlsPort = (tls.address() as AddressInfo).port;
  const plain = new PageSites({ 'plain.test': { '/': { body: '<a href="https://tls.test:443/b.html">b</a>' } } });
  const plainPort = await plain.listen();
  try {
    const run = await runCli(['crawl', '--seed', 'https://tls.test/', '--allow-host', 'plain.test', '--map', `tls.test:443=127.0.0.1:${tlsPort}`, '--map', `plain.test:80=127.0.0.1:${plainPort}`,
      '--delay-ms', '0', '--partitions', '2', '--data-dir', join(dir, 'data'), '--json', '--no-rank'], { env: { NODE_EXTRA_CA_CERTS: cert } });
    assert.equal(run.code, 0, run.stderr);
    const summary = JSON.parse(run.stdout) as { pages: number; frontier: Record<string, number> };
    assert.equal(summary.pages, 3, `https://tls.test/, /b.html and http://plain.test/ fetched: ${run.stdout}`);
    assert.equal(plain.hits('plain.test/'), 1);
  } finally {
    tls.closeAllConnections();
    await new Promise<void>((ok) => tls.close(() => ok()));
    await plain.close();
    cleanup();
  }
});
