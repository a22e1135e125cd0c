import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { writeFile, mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { S3Http } from '../src/checkpoint/s3Http.js';
import { S3Objects, s3ConnectionFromEnv } from '../src/checkpoint/s3Objects.js';
import { InvalidArgumentError, S3RequestError } from '../src/errors.js';
import { rawS3Client, s3Env, S3_BUCKET, s3Unavailable } from './kit/s3.js';

/**
 * Issue 16: the S3 checkpoint objects' own requests (src/checkpoint/s3Http.ts: SigV4 by the
 * AWS SDK's signer, sent by undici) against the real S3 server of scripts/s3/start.sh, read
 * back by `@aws-sdk/client-s3` as an independent client; refusals and lost connections come
 * back as `S3RequestError`s, retried where the SDKs' standard mode retries. Faults come from a
 * proxy in front of the real server that refuses or cuts the first requests it is sent.
 */

const reason = await s3Unavailable();
if (reason && process.env.SHARDFLOW_REQUIRE_BROKERS === '1') throw new Error(`the S3 server is required (SHARDFLOW_REQUIRE_BROKERS=1) but unavailable: ${reason}`);

let work: string;
before(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'shardflow-s3req-'));
});
after(async () => {
  await rm(work, { recursive: true, force: true });
});

const prefix = (what: string): string => `test/s3req-${what}-${process.pid}-${randomBytes(3).toString('hex')}`;
const connection = () => s3ConnectionFromEnv(s3Env());

/**
 * A proxy to the S3 server that answers each of the first `faults` requests with `fault`
 * (an HTTP status and S3 error code, or 'cut': the connection closed before any answer), and
 * forwards the others. `seen` counts every request.
 */
async function faultyProxy(faults: number, fault: { status: number; code: string; date?: Date } | 'cut'): Promise<{ endpoint: string; seen: () => number; amzDates: string[]; close: () => Promise<void> }> {
  const target = new URL(s3Env().AWS_ENDPOINT_URL!);
  let seen = 0;
  const amzDates: string[] = [];
  const server = http.createServer((req, res) => {
    seen++;
    amzDates.push(String(req.headers['x-amz-date']));
    if (seen <= faults) {
      req.resume();
      if (fault === 'cut') {
        req.socket.destroy();
        return;
      }
      res.writeHead(fault.status, { 'content-type': 'application/xml', ...(fault.date ? { date: fault.date.toUTCString() } : {}) });
      res.end(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>${fault.code}</Code><Message>injected</Message></Error>`);
      return;
    }
    // The signature covers the host header: forward it as the client sent it.
    const up = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    seen: () => seen,
    amzDates,
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

describe('S3 requests of the checkpoint store', { skip: reason ? `S3 server unavailable: ${reason}` : false }, () => {
  it('keys with characters SigV4 escapes round-trip: put from memory and from a file, list, get, range, delete, each read back by the AWS SDK', async () => {
    const p = prefix('keys');
    const objects = new S3Objects(S3_BUCKET, p, connection());
    const raw = rawS3Client();
    try {
      const names = ['a/b!c-1z_x.y~', "g/p(1)*'q'", 'sp ace/plus+equals=amp&', 'unicode/héllo-ü', '_groups/ranks-a1-0!p0.3!p1.4'];
      const bodies = new Map(names.map((n, i) => [n, randomBytes(1000 + i * 517)]));
      for (const [n, b] of bodies) await objects.putBytes(n, b);
      const file = path.join(work, 'file.bin');
      const fileBytes = randomBytes(300_000);
      await writeFile(file, fileBytes);
      await objects.putFile('files/sst 000012.sst', file, fileBytes.length);
      bodies.set('files/sst 000012.sst', fileBytes);

      const listed = await objects.list('');
      assert.deepEqual(listed.map((o) => o.name).sort(), [...bodies.keys()].sort());
      for (const o of listed) assert.equal(o.bytes, bodies.get(o.name)!.length, o.name);
      const viaSdk = await raw.send(new ListObjectsV2Command({ Bucket: S3_BUCKET, Prefix: `${p}/` }));
      // (S3Proxy's filesystem backend also lists its folders, as keys ending in '/')
      assert.deepEqual((viaSdk.Contents ?? []).map((c) => c.Key!.slice(p.length + 1)).filter((k) => !k.endsWith('/')).sort(), [...bodies.keys()].sort());

      for (const [n, b] of bodies) {
        assert.deepEqual(await objects.getBytes(n), b, n);
        const sdk = await raw.send(new GetObjectCommand({ Bucket: S3_BUCKET, Key: `${p}/${n}` }));
        assert.deepEqual(Buffer.from(await sdk.Body!.transformToByteArray()), b, `${n} via the SDK`);
        assert.deepEqual(await objects.getRange(n, 10, 100), b.subarray(10, 110), `${n} range`);
        const chunks: Buffer[] = [];
        for await (const c of (await objects.getStream(n))!) chunks.push(c as Buffer);
        assert.deepEqual(Buffer.concat(chunks), b, `${n} stream`);
      }
      // An object the SDK wrote reads back the same way.
      const sdkBytes = randomBytes(777);
      await raw.send(new PutObjectCommand({ Bucket: S3_BUCKET, Key: `${p}/sdk/o!1`, Body: sdkBytes }));
      assert.deepEqual(await objects.getBytes('sdk/o!1'), sdkBytes);
      assert.deepEqual(await objects.getRange('sdk/o!1', 700, 500), sdkBytes.subarray(700));
      assert.deepEqual(await objects.getRange('sdk/o!1', 777, 10), Buffer.alloc(0), 'a range past the end is empty');

      assert.equal(await objects.getBytes('missing/x'), undefined);
      assert.equal(await objects.getRange('missing/x', 0, 10), undefined);
      assert.equal(await objects.getStream('missing/x'), undefined);
      await objects.delete([...bodies.keys(), 'sdk/o!1', 'never/was']);
      assert.deepEqual(await objects.list(''), []);
    } finally {
      raw.destroy();
      await objects.close();
    }
  });

  it('a listing longer than a page is read page by page', async () => {
    const p = prefix('pages');
    const objects = new S3Objects(S3_BUCKET, p, connection());
    const http = new S3Http(S3_BUCKET, connection());
    try {
      const names = Array.from({ length: 7 }, (_, i) => `k/${i}`);
      for (const n of names) await objects.putBytes(n, Buffer.from(n));
      const pages: string[][] = [];
      let token: string | undefined;
      do {
        const page = await http.listPage(`${p}/k/`, token, 3);
        pages.push(page.objects.map((o) => o.key.slice(p.length + 1)));
        token = page.next;
      } while (token);
      assert.deepEqual(pages.map((x) => x.length), [3, 3, 1]);
      assert.deepEqual(pages.flat().sort(), names);
      assert.deepEqual((await objects.list('k/')).map((o) => o.name).sort(), names);
      await objects.delete(names);
    } finally {
      await http.close();
      await objects.close();
    }
  });

  it('refusals are S3RequestErrors naming the request and S3\'s code: a wrong secret, a missing bucket (also on a read, never taken for a missing object)', async () => {
    const wrong = new S3Objects(S3_BUCKET, prefix('wrong'), { ...connection(), credentials: { accessKeyId: s3Env().AWS_ACCESS_KEY_ID!, secretAccessKey: 'not-the-secret' } });
    const noBucket = new S3Objects(`no-such-bucket-${randomBytes(4).toString('hex')}`, 'x', connection());
    try {
      const started = Date.now();
      const refused = await wrong.putBytes('a', Buffer.from('a')).then(() => undefined, (err: unknown) => err);
      assert.ok(refused instanceof S3RequestError, String(refused));
      assert.equal(refused.code, 'SF_ERR_S3_REQUEST');
      assert.equal(refused.status, 403);
      assert.match(refused.s3Code, /SignatureDoesNotMatch|AccessDenied|InvalidAccessKeyId/);
      assert.equal(refused.method, 'PUT');
      assert.match(refused.message, /^S3 PUT s3:\/\/shardflow\/test\/s3req-wrong-.*\/a: HTTP 403, .*\(server http:\/\/[^)]+\)$/);
      assert.ok(Date.now() - started < 5000, 'a refusal is not retried');
      for (const op of [() => noBucket.getBytes('a'), () => noBucket.getRange('a', 0, 1), () => noBucket.list(''), () => noBucket.putBytes('a', Buffer.from('a'))]) {
        const err = await op().then(() => undefined, (e: unknown) => e);
        assert.ok(err instanceof S3RequestError, String(err));
        assert.equal(err.status, 404);
        assert.equal(err.s3Code, 'NoSuchBucket');
      }
    } finally {
      await wrong.close();
      await noBucket.close();
    }
  });

  it('503 SlowDown and cut connections are retried (3 attempts): a put gets through after two faults, and fails after three with the last one', async () => {
    for (const fault of [{ status: 503, code: 'SlowDown' }, 'cut'] as const) {
      const twice = await faultyProxy(2, fault);
      const p = prefix('retry');
      const objects = new S3Objects(S3_BUCKET, p, { ...connection(), endpoint: twice.endpoint });
      try {
        const b = randomBytes(5000);
        await objects.putBytes('o', b);
        assert.equal(twice.seen(), 3, `two faults (${JSON.stringify(fault)}) and the put`);
        assert.deepEqual(await new S3Objects(S3_BUCKET, p, connection()).getBytes('o'), b, 'stored once through the proxy');
        await objects.delete(['o']);
      } finally {
        await objects.close();
        await twice.close();
      }
      const always = await faultyProxy(3, fault);
      const failing = new S3Objects(S3_BUCKET, prefix('retry'), { ...connection(), endpoint: always.endpoint });
      try {
        const err = await failing.putBytes('o', Buffer.from('x')).then(() => undefined, (e: unknown) => e);
        assert.ok(err instanceof S3RequestError, String(err));
        assert.equal(always.seen(), 3);
        if (fault === 'cut') {
          assert.equal(err.status, 0);
          assert.ok(err.cause, 'the network error is the cause');
        } else {
          assert.equal(err.status, 503);
          assert.equal(err.s3Code, 'SlowDown');
        }
      } finally {
        await failing.close();
        await always.close();
      }
    }
  });

  it('a request refused as RequestTimeTooSkewed is signed again with the server\'s clock', async () => {
    const ahead = new Date(Date.now() + 5 * 60_000);
    const skewed = await faultyProxy(1, { status: 403, code: 'RequestTimeTooSkewed', date: ahead });
    const objects = new S3Objects(S3_BUCKET, prefix('skew'), { ...connection(), endpoint: skewed.endpoint });
    try {
      await objects.putBytes('o', Buffer.from('x'));
      assert.equal(skewed.seen(), 2);
      const amzDate = (s: string) => Date.parse(s.replace(/^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/, '$1-$2-$3T$4:$5:$6Z'));
      const signedAt = amzDate(skewed.amzDates[1]!);
      assert.ok(Math.abs(signedAt - ahead.getTime()) < 10_000, `signed at ${skewed.amzDates[1]}, the server's clock ${ahead.toISOString()}`);
      await objects.delete(['o']);
    } finally {
      await objects.close();
      await skewed.close();
    }
  });

  it('a server that accepts and never answers fails each attempt after timeoutMs; a request that cannot be signed fails at once, not retried; bad connection values are refused', async () => {
    const silent = http.createServer(() => undefined); // takes requests, never answers
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    const objects = new S3Objects(S3_BUCKET, 'x', { ...connection(), endpoint: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`, timeoutMs: 300, maxAttempts: 2 });
    try {
      const started = Date.now();
      const err = await objects.getBytes('a').then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof S3RequestError, String(err));
      assert.equal(err.status, 0);
      assert.equal(err.s3Code, 'UND_ERR_HEADERS_TIMEOUT');
      assert.ok(Date.now() - started < 10_000, `two attempts of 300 ms, not undici's 300 s (took ${Date.now() - started} ms)`);
    } finally {
      await objects.close();
      silent.closeAllConnections();
      silent.close();
    }
    let asked = 0;
    const unsigned = new S3Objects(S3_BUCKET, 'x', { ...connection(), credentials: async () => { asked++; throw new Error('no credentials in this test'); } });
    try {
      const err = await unsigned.list('').then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof S3RequestError, String(err));
      assert.equal(err.s3Code, 'SigningFailed');
      assert.match(err.message, /no credentials in this test/);
      assert.equal(asked, 1, 'not retried');
    } finally {
      await unsigned.close();
    }
    for (const bad of [{ maxAttempts: 0 }, { maxAttempts: Number.NaN }, { connections: 0 }, { timeoutMs: -1 }, { region: '' }, { endpoint: 'ftp://x' }]) {
      assert.throws(() => new S3Objects(S3_BUCKET, 'x', { ...connection(), ...bad }), InvalidArgumentError, JSON.stringify(bad));
    }
  });

  it('an endpoint that does not answer fails after its attempts with status 0 and the connection error', async () => {
    const objects = new S3Objects(S3_BUCKET, 'x', { ...connection(), endpoint: 'http://127.0.0.1:1', maxAttempts: 2 });
    try {
      const err = await objects.list('').then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof S3RequestError, String(err));
      assert.equal(err.status, 0);
      assert.match(err.message, /no answer/);
    } finally {
      await objects.close();
    }
  });
});
