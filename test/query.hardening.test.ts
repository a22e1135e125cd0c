import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { BrokerDisconnectedError, systemClock } from '../src/index.js';
import { hostPartitioner } from '../src/actors/partition/hostPartitioner.js';
import { hostHeaderCheck } from '../src/runtime/http/hostCheck.js';
import { startWebIndex, type WebIndex } from '../src/topology/webIndex.js';
import { QueryService } from '../src/query/queryService.js';
import { startQueryServer, type QueryServer, type QueryServerOptions } from '../src/query/server.js';
import { checkExposure, resolveToken } from '../src/cli/serveOptions.js';
import { memoryLogger, tempDir } from './kit/datasets.js';
import { runCli, type CliRun } from './kit/cliRun.js';
import { withServe } from './kit/serveRun.js';


interface RawAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: any;
}

/**
 * Sends `head` (request line and headers, without the final blank line) and `body` as bytes on
 * a fresh connection to `url`, so that malformed requests reach the server as written (HTTP
 * clients refuse to send them), and parses the answer.
 */
function raw(url: string, head: string, body = ''): Promise<RawAnswer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(`${head}\r\nConnection: close\r\n\r\n${body}`));
    const chunks: Buffer[] = [];
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', () => undefined); // the server may reset after answering (431, 400 from the parser)
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      if (split < 0) return reject(new Error(`no HTTP answer to ${JSON.stringify(head.slice(0, 80))}: ${JSON.stringify(text)}`));
      const [statusLine, ...lines] = text.slice(0, split).split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) headers[line.slice(0, line.indexOf(':')).toLowerCase()] = line.slice(line.indexOf(':') + 1).trim();
      const rest = text.slice(split + 4);
      resolve({ status: Number(statusLine!.split(' ')[1]), headers, body: rest === '' ? undefined : JSON.parse(rest) });
    });
  });
}

/** A web index on real RocksDB stores (2 empty partitions) with a query server in front. */
async function withServer(options: Omit<QueryServerOptions, 'service'>, body: (api: QueryServer, index: WebIndex) => Promise<void>): Promise<void> {
  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker();
  const index = await startWebIndex({ partitions: 2, dataDir: join(dir, 'data'), broker, weigh: uniformWeights, log: memoryLogger().log, crawlers: 0 });
  let api: QueryServer | undefined;
  try {
    const service = new QueryService({ partitioner: index.partitioner, view: (p) => index.view(p), clock: index.system.clock });
    api = await startQueryServer({ service, port: 0, ...options });
    await body(api, index);
  } finally {
    await api?.close();
    await index.stop();
    await broker.close();
    cleanup();
  }
}

/** Asserts an answer is the documented error shape: exactly `error` and `reason` (a sentence). */
function assertErrorShape(answer: RawAnswer, status: number, error: string, reason: RegExp, what: string): void {
  assert.equal(answer.status, status, `${what}: ${JSON.stringify(answer.body)}`);
  assert.match(answer.headers['content-type'] ?? '', /^application\/json/, what);
  assert.deepEqual(Object.keys(answer.body).sort(), ['error', 'reason'], what);
  assert.equal(answer.body.error, error, what);
  assert.match(answer.body.reason, reason, what);
}

test('the query API answers only to loopback Host names on a loopback bind (DNS rebinding), plus its allow-list', { timeout: 60_000 }, async () => {
  await withServer({}, async (api) => {
    const port = new URL(api.url).port;
    for (const host of ['attacker.example', `attacker.example:${port}`, '10.1.2.3', 'localhost.attacker.example', 'localhost/x', 'user@localhost']) {
      assertErrorShape(await raw(api.url, `GET /v1/health HTTP/1.1\r\nHost: ${host}`), 403, 'forbidden', /not allowed|malformed Host/, host);
      assertErrorShape(await raw(api.url, `GET /v1/top/pages HTTP/1.1\r\nHost: ${host}`), 403, 'forbidden', /not allowed|malformed Host/, host);
    }
    // Even a request the router refuses (bad escape) is refused for its Host first.
    assertErrorShape(await raw(api.url, 'GET /v1/page%ZZ HTTP/1.1\r\nHost: attacker.example'), 403, 'forbidden', /attacker\.example/, 'bad path, foreign Host');
    assertErrorShape(await raw(api.url, 'GET /v1/health HTTP/1.1'), 403, 'forbidden', /no Host header/, 'no Host');
    for (const host of ['127.0.0.1', `127.0.0.1:${port}`, `localhost:${port}`, 'LOCALHOST', 'app.localhost', `[::1]:${port}`]) {
      const health = await raw(api.url, `GET /v1/health HTTP/1.1\r\nHost: ${host}`);
      assert.equal(health.status, 200, host);
      assert.deepEqual(health.body, { status: 'ok', partitions: 2 });
      const top = await raw(api.url, `GET /v1/top/pages?limit=5 HTTP/1.1\r\nHost: ${host}`);
      assert.equal(top.status, 200, host);
      assert.deepEqual(top.body.top, []);
    }
  });
  await withServer({ allowedHosts: ['index.example.org', '.corp.test'] }, async (api) => {
    for (const host of ['index.example.org', 'INDEX.example.org:7070', 'corp.test', 'a.b.corp.test:80', 'localhost']) {
      assert.equal((await raw(api.url, `GET /v1/health HTTP/1.1\r\nHost: ${host}`)).status, 200, host);
    }
    for (const host of ['example.org', 'xcorp.test', 'index.example.org.attacker.example', '10.1.2.3']) {
      assertErrorShape(await raw(api.url, `GET /v1/health HTTP/1.1\r\nHost: ${host}`), 403, 'forbidden', /DNS rebinding.*index\.example\.org, \.corp\.test/, host);
    }
  });
});

test('hostHeaderCheck: on a non-loopback bind, its own name and IP literals pass; bad allow-list entries throw', () => {
  const byName = hostHeaderCheck({ bindHost: 'index.lan' });
  assert.equal(byName('index.lan:7070'), undefined);
  assert.equal(byName('192.168.1.9:7070'), undefined, 'DNS rebinding cannot send an IP literal');
  assert.equal(byName('[fe80::1]'), undefined);
  assert.equal(byName('localhost'), undefined);
  assert.match(byName('evil.lan') ?? '', /"evil\.lan" is not allowed.*loopback names, index\.lan, IP addresses/);
  const wildcard = hostHeaderCheck({ bindHost: '0.0.0.0' });
  assert.match(wildcard('0.0.0.0.attacker.example') ?? '', /not allowed/);
  assert.equal(wildcard('10.0.0.7'), undefined);
  assert.throws(() => hostHeaderCheck({ bindHost: '127.0.0.1', allowedHosts: ['a.test:80'] }), { code: 'SF_ERR_INVALID_ARGUMENT', message: /not a host name/ });
  assert.throws(() => hostHeaderCheck({ bindHost: '127.0.0.1', allowedHosts: ['http://a.test/'] }), { code: 'SF_ERR_INVALID_ARGUMENT' });
});

test('a non-loopback bind without a token is refused unless insecure; then IP Hosts pass and foreign names do not', { timeout: 60_000 }, async () => {
  const service = {} as QueryService; // never reached: the refusal comes first
  await assert.rejects(startQueryServer({ service, host: '0.0.0.0', port: 0 }), { code: 'SF_ERR_INVALID_ARGUMENT', message: /refusing to serve the query API on 0\.0\.0\.0 without a token/ });
  await assert.rejects(startQueryServer({ service, host: '::', port: 0 }), { code: 'SF_ERR_INVALID_ARGUMENT' });
  await withServer({ host: '0.0.0.0', insecure: true }, async (api) => {
    const url = api.url.replace('0.0.0.0', '127.0.0.1');
    assert.equal((await raw(url, 'GET /v1/health HTTP/1.1\r\nHost: 10.1.2.3:7070')).status, 200);
    assert.equal((await raw(url, 'GET /v1/health HTTP/1.1\r\nHost: localhost')).status, 200);
    assertErrorShape(await raw(url, 'GET /v1/health HTTP/1.1\r\nHost: attacker.example'), 403, 'forbidden', /attacker\.example/, 'foreign name on 0.0.0.0');
  });
  await withServer({ host: '0.0.0.0', token: 's3cret' }, async (api) => {
    const url = api.url.replace('0.0.0.0', '127.0.0.1');
    assertErrorShape(await raw(url, 'GET /v1/top/pages HTTP/1.1\r\nHost: 127.0.0.1'), 401, 'unauthorized', /Bearer/, 'no token');
    assert.equal((await raw(url, 'GET /v1/top/pages HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer s3cret')).status, 200);
  });
});

test('every malformed request is answered in the documented error shape', { timeout: 60_000 }, async () => {
  await withServer({}, async (api) => {
    const H = 'Host: localhost';
    const cases: Array<[string, string, string, number, string, RegExp]> = [
      ['bad escape in the path', `GET /v1/page%ZZ HTTP/1.1\r\n${H}`, '', 400, 'invalid_request', /malformed percent-escape in path/],
      ['bad escape in a path parameter', `GET /v1/hosts/a%G1.test HTTP/1.1\r\n${H}`, '', 400, 'invalid_request', /malformed percent-escape in path/],
      ['escape of invalid UTF-8 in the path', `GET /v1/hosts/%FF HTTP/1.1\r\n${H}`, '', 400, 'invalid_request', /malformed percent-escape in path/],
      ['bad escape in the query', `GET /v1/page?url=http://a.test/%ZZ HTTP/1.1\r\n${H}`, '', 400, 'invalid_request', /malformed percent-escape in query string: "url=http:\/\/a\.test\/%ZZ"/],
      ['truncated escape in the query', `GET /v1/top/pages?limit=1%2 HTTP/1.1\r\n${H}`, '', 400, 'invalid_request', /malformed percent-escape/],
      ['unknown query parameter', `GET /v1/page?url=http://a.test/&limit=5 HTTP/1.1\r\n${H}`, '', 400, 'invalid_request', /unknown query parameter "limit" for \/v1\/page: it takes "url"/],
      ['query parameter on a route that takes none', `GET /v1/health?verbose=1 HTTP/1.1\r\n${H}`, '', 400, 'invalid_request', /unknown query parameter "verbose".*none/],
      ['repeated query parameter', `GET /v1/top/hosts?limit=1&limit=2 HTTP/1.1\r\n${H}`, '', 400, 'invalid_request', /"limit" is given 2 times/],
      ['bad limit', `GET /v1/top/hosts?limit=-1 HTTP/1.1\r\n${H}`, '', 400, 'invalid_request', /"limit" must be a non-negative integer/],
      ['missing url', `GET /v1/outlinks HTTP/1.1\r\n${H}`, '', 400, 'invalid_request', /"url" is required/],
      ['bad url', `GET /v1/page?url=ftp://a.test/ HTTP/1.1\r\n${H}`, '', 400, 'invalid_url', /scheme ftp: is not crawled/],
      ['a body on GET', `GET /v1/top/pages HTTP/1.1\r\n${H}\r\nContent-Type: application/json\r\nContent-Length: 2`, '{}', 400, 'invalid_request', /takes no request body/],
      ['a chunked body', `GET /v1/top/pages HTTP/1.1\r\n${H}\r\nTransfer-Encoding: chunked`, '3\r\nabc\r\n0\r\n\r\n', 400, 'invalid_request', /takes no request body/],
      ['a body on POST', `POST /v1/page HTTP/1.1\r\n${H}\r\nContent-Type: text/plain\r\nContent-Length: 3`, 'abc', 400, 'invalid_request', /takes no request body/],
      ['absolute-form target', `GET http://attacker.example/v1/health HTTP/1.1\r\n${H}`, '', 400, 'invalid_request', /must be a path starting with "\/"/],
      ['over-long target', `GET /v1/page?url=http://a.test/${'a'.repeat(9000)} HTTP/1.1\r\n${H}`, '', 414, 'invalid_request', /more than 8192/],
      ['over-long path parameter', `GET /v1/hosts/${'a'.repeat(300)}.test HTTP/1.1\r\n${H}`, '', 404, 'not_found', /no live page of host a+\.test/],
      ['request line and headers over 16 KiB', `GET /v1/page?url=http://a.test/${'a'.repeat(20_000)} HTTP/1.1\r\n${H}`, '', 431, 'invalid_request', /exceed \d+ bytes/],
      ['not HTTP', 'HELLO THERE', '', 400, 'invalid_request', /malformed HTTP request/],
      ['unknown route', `GET /v1/nothing HTTP/1.1\r\n${H}`, '', 404, 'not_found', /no route GET \/v1\/nothing/],
      ['unknown route, trailing slash', `GET /v1/health/ HTTP/1.1\r\n${H}`, '', 404, 'not_found', /no route GET \/v1\/health\//],
      ['unknown route with a method no route has', `PROPFIND /v1/nothing HTTP/1.1\r\n${H}`, '', 404, 'not_found', /no route PROPFIND/],
      ['wrong method', `POST /v1/page?url=http://a.test/ HTTP/1.1\r\n${H}`, '', 405, 'method_not_allowed', /POST is not allowed on \/v1\/page: use GET, HEAD/],
      ['DELETE on a read-only route', `DELETE /v1/top/pages HTTP/1.1\r\n${H}`, '', 405, 'method_not_allowed', /use GET, HEAD$/],
      ['OPTIONS (CORS preflight)', `OPTIONS /v1/page HTTP/1.1\r\n${H}\r\nOrigin: http://attacker.example`, '', 405, 'method_not_allowed', /OPTIONS/],
      ['PUT on a host', `PUT /v1/hosts/a.test HTTP/1.1\r\n${H}`, '', 405, 'method_not_allowed', /use GET, HEAD, DELETE/],
      ['DELETE without a token', `DELETE /v1/hosts/a.test HTTP/1.1\r\n${H}`, '', 401, 'unauthorized', /admin routes need the server to run with a token/],
    ];
    for (const [what, head, body, status, error, reason] of cases) {
      const answer = await raw(api.url, head, body);
      assertErrorShape(answer, status, error, reason, what);
      if (status === 405) assert.match(answer.headers.allow ?? '', /^GET, HEAD/, `${what}: Allow`);
    }
    // The server still answers after all of them.
    assert.equal((await raw(api.url, `GET /v1/health HTTP/1.1\r\n${H}`)).status, 200);
    // A literal "%" written as %25 is fine: it reaches the lookup as "%".
    assertErrorShape(await raw(api.url, `GET /v1/page?url=http://a.test/100%25 HTTP/1.1\r\n${H}`), 404, 'not_found', /^no page stored for http:\/\/a\.test\/100%$/, '%25');
  });
});

test('resolveToken: --token-file, then $SHARDFLOW_TOKEN; --token warns; bad sources are clear errors', () => {
  const { dir, cleanup } = tempDir();
  try {
    const warnings: string[] = [];
    const warn = (line: string) => void warnings.push(line);
    const file = join(dir, 'token');
    writeFileSync(file, '  f1le-t0ken\n');
    chmodSync(file, 0o600);
    assert.equal(resolveToken({ tokenFile: file }, { SHARDFLOW_TOKEN: 'from-env' }, warn), 'f1le-t0ken', 'the file wins over the environment');
    assert.deepEqual(warnings, []);
    assert.equal(resolveToken({}, { SHARDFLOW_TOKEN: 'from-env' }, warn), 'from-env');
    assert.equal(resolveToken({}, { SHARDFLOW_TOKEN: '' }, warn), undefined, 'an empty variable is unset');
    assert.equal(resolveToken({}, {}, warn), undefined);
    assert.deepEqual(warnings, []);
    assert.equal(resolveToken({ token: 'inline' }, {}, warn), 'inline');
    assert.match(warnings.pop() ?? '', /--token is visible to other users in `ps`.*--token-file PATH or \$SHARDFLOW_TOKEN/);
    chmodSync(file, 0o644);
    assert.equal(resolveToken({ tokenFile: file }, {}, warn), 'f1le-t0ken');
    assert.match(warnings.pop() ?? '', /readable by other users \(mode 644\); chmod 600 it/);
    assert.throws(() => resolveToken({ token: 'a', tokenFile: file }, {}, warn), { code: 'commander.invalidArgument', message: /--token or --token-file, not both/ });
    assert.throws(() => resolveToken({ tokenFile: join(dir, 'missing') }, {}, warn), { message: /cannot read --token-file .*missing: ENOENT/ });
    writeFileSync(file, '\n\n');
    assert.throws(() => resolveToken({ tokenFile: file }, {}, warn), { message: /--token-file .*: the token is empty/ });
    writeFileSync(file, 'two\nlines\n');
    assert.throws(() => resolveToken({ tokenFile: file }, {}, warn), { message: /one line of visible ASCII/ });
    assert.throws(() => resolveToken({}, { SHARDFLOW_TOKEN: 'with space' }, warn), { message: /\$SHARDFLOW_TOKEN: the token must be one line/ });
  } finally {
    cleanup();
  }
});

test('checkExposure: a non-loopback host needs a token or --insecure, which warns', () => {
  const warnings: string[] = [];
  const warn = (line: string) => void warnings.push(line);
  checkExposure({ host: '127.0.0.1', token: undefined, insecure: false }, warn);
  checkExposure({ host: 'localhost', token: undefined, insecure: false }, warn);
  checkExposure({ host: '0.0.0.0', token: 't', insecure: false }, warn);
  assert.deepEqual(warnings, []);
  assert.throws(() => checkExposure({ host: '0.0.0.0', token: undefined, insecure: false }, warn), { code: 'commander.invalidArgument', message: /refusing to serve the query API on 0\.0\.0\.0 without a token.*--token-file PATH \(or set \$SHARDFLOW_TOKEN\), or --insecure/ });
  checkExposure({ host: '0.0.0.0', token: undefined, insecure: true }, warn);
  assert.match(warnings.join('\n'), /WARNING: --insecure: the query API on 0\.0\.0\.0 has NO AUTHENTICATION/);
});

/** Runs `shardflow ...args` to its end, without a token in the environment unless given. */
function run(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  return runCli(args, { env: { SHARDFLOW_TOKEN: '', ...env } as Record<string, string> });
}

/** `withServe` (test/kit/serveRun.ts). */
const serve = withServe;

test('shardflow serve: refuses 0.0.0.0 without a token, warns with --insecure, takes the token from a file or $SHARDFLOW_TOKEN', { timeout: 120_000 }, async () => {
  const { dir, cleanup } = tempDir();
  try {
    const data = join(dir, 'data');
    mkdirSync(data);
    const refused = await run(['serve', '--data-dir', data, '--partitions', '1', '--host', '0.0.0.0', '--port', '0']);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /refusing to serve the query API on 0\.0\.0\.0 without a token.*--token-file PATH.*--insecure/);
    const both = await run(['serve', '--data-dir', data, '--partitions', '1', '--token', 'a', '--token-file', join(dir, 'x')]);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /--token or --token-file, not both/);
    assert.match((await run(['serve', '--data-dir', data, '--allowed-host', 'a.test:80'])).stderr, /not a host name/);
    const crawlToken = await run(['crawl', '--seed', 'http://a.test/', '--token-file', join(dir, 'x'), '--data-dir', join(dir, 'crawl')]);
    assert.equal(crawlToken.code, 2);
    assert.match(crawlToken.stderr, /--token and --token-file apply to --serve only/);

    await serve(['--data-dir', data, '--partitions', '1', '--host', '0.0.0.0', '--port', '0', '--insecure'], {}, async (api, stderr) => {
      assert.match(stderr(), /WARNING: --insecure: the query API on 0\.0\.0\.0 has NO AUTHENTICATION/);
      const top = await run(['query', 'top-pages', '--api', api]);
      assert.equal(top.code, 0, top.stderr);
      assert.deepEqual(JSON.parse(top.stdout).top, []);
    });

    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'file-token\n', { mode: 0o600 });
    await serve(['--data-dir', data, '--port', '0', '--token-file', tokenFile], {}, async (api, stderr) => {
      assert.doesNotMatch(stderr(), /warning/i);
      // A second serve on the same data dir is refused at once (it answered 500s for ever, found by a new user).
      const second = await run(['serve', '--data-dir', data, '--port', '0', '--token-file', tokenFile]);
      assert.notEqual(second.code, 0);
      assert.match(second.stderr, /data dir .* is in use by process \d+ \(another shardflow job on it\)/);
      const none = await run(['query', 'top-pages', '--api', api]);
      assert.equal(none.code, 2);
      assert.match(none.stderr, /401: a valid "Authorization: Bearer <token>" header is required/);
      const byFile = await run(['query', 'top-pages', '--api', api, '--token-file', tokenFile]);
      assert.equal(byFile.code, 0, byFile.stderr);
      const byEnv = await run(['query', 'top-pages', '--api', api], { SHARDFLOW_TOKEN: 'file-token' });
      assert.equal(byEnv.code, 0, byEnv.stderr);
      const inline = await run(['query', 'top-pages', '--api', api, '--token', 'file-token']);
      assert.equal(inline.code, 0);
      assert.match(inline.stderr, /warning: --token is visible to other users in `ps`/);
      const pageLimit = await run(['query', 'page', 'http://a.test/', '--api', api, '--limit', '3'], { SHARDFLOW_TOKEN: 'file-token' });
      assert.equal(pageLimit.code, 2);
      assert.match(pageLimit.stderr, /--limit does not apply to query page/);
    });

    await serve(['--data-dir', data, '--port', '0'], { SHARDFLOW_TOKEN: 'env-token' }, async (api) => {
      assert.equal((await run(['query', 'top-pages', '--api', api])).code, 2, 'the environment token is required');
      assert.equal((await run(['query', 'top-pages', '--api', api], { SHARDFLOW_TOKEN: 'env-token' })).code, 0);
    });
  } finally {
    cleanup();
  }
});

// Found by a new user: with the broker down, a cluster's query server (whose reads go through
// the broker) answered 500 `internal` ("connect ECONNREFUSED") while /v1/health said ok.
test('a read whose broker does not answer is 503 unavailable, not 500; /v1/health stays a liveness check', { timeout: 60_000 }, async () => {
  const service = new QueryService({
    partitioner: hostPartitioner(2),
    view: async () => {
      throw new BrokerDisconnectedError('pulsar ws://127.0.0.1:8080/ws/v2/producer/x: connect ECONNREFUSED 127.0.0.1:8080');
    },
    clock: systemClock,
  });
  const api = await startQueryServer({ service, port: 0 });
  try {
    const res = await fetch(`${api.url}/v1/page?url=${encodeURIComponent('http://a.example/')}`);
    const body = (await res.json()) as { error: string; reason: string };
    assert.equal(res.status, 503, JSON.stringify(body));
    assert.equal(body.error, 'unavailable');
    assert.match(body.reason, /^the broker does not answer: .*ECONNREFUSED/);
    const health = await fetch(`${api.url}/v1/health`);
    assert.equal(health.status, 200);
  } finally {
    await api.close();
  }
});
