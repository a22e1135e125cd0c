import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  ChaosPolicy, MemoryBroker, Topology, decodeInt64, defineNamespace, encodeInt64, hostOf, int64Add, msgpackCodec, type Logger,
} from '../src/index.js';
import { tempDir } from './kit/datasets.js';

/**
 * A read-then-write stage, written the obvious way in `onMessage` (issue 14): each page
 * version reads the page's stored outlinks (`ctx.reads.iterate` over its prefix), deletes the
 * stale ones while iterating, puts the new ones and emits add / remove link operations, and
 * counts its versions with a get + put (no merge). A second stage folds the operations into an
 * in-degree per target. Versions of one page arrive in one batch (checked), under chaos: with
 * reads that did not see the batch's own writes, the second version would diff against the
 * committed outlinks and emit wrong operations, and the get + put count would lose updates.
 */
interface PageVersion { readonly url: string; readonly outlinks: readonly string[] }
interface LinkOp { readonly op: 'add' | 'remove'; readonly source: string; readonly target: string }
const isPage = (v: unknown): v is PageVersion => typeof (v as PageVersion)?.url === 'string' && Array.isArray((v as PageVersion).outlinks);
const isLinkOp = (v: unknown): v is LinkOp => ((v as LinkOp)?.op === 'add' || (v as LinkOp)?.op === 'remove') && typeof (v as LinkOp).target === 'string';
const quiet: Logger = { debug() {}, warn() {}, error() {} };
const EMPTY = new Uint8Array(0);

test('a stage reads its batch\'s own writes: two versions of a page in one batch diff exactly, get + put counts lose nothing', { timeout: 240_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-ryw-');
  const broker = new MemoryBroker();
  const pages = defineNamespace('page-versions', { codec: msgpackCodec('PageVersion', isPage), partitions: 2, key: (p: PageVersion) => hostOf(p.url) });
  const links = defineNamespace('link-ops', { codec: msgpackCodec('LinkOp', isLinkOp), partitions: 2, key: (l: LinkOp) => l.target });
  let batchesWithTwoVersions = 0;
  const topology = Topology.create('ryw-test')
    .stage('pages', {
      input: pages,
      outputs: { links },
      columnFamilies: { outlinks: {}, versions: {} },
      batching: { maxCount: 64, maxDelayMs: 20 },
      async onMessage(ctx, page) {
        const prefix = `${page.url}\u0000`;
        const wanted = new Set(page.outlinks);
        for await (const [key] of ctx.reads.iterate('outlinks', { prefix })) {
          const target = key.toString().slice(prefix.length);
          if (wanted.delete(target)) continue; // stored already
          ctx.writes.delete('outlinks', key);
          ctx.emit('links', { op: 'remove', source: page.url, target });
        }
        for (const target of wanted) {
          ctx.writes.put('outlinks', prefix + target, EMPTY);
          ctx.emit('links', { op: 'add', source: page.url, target });
        }
        const seen = await ctx.reads.get('versions', page.url);
        ctx.writes.put('versions', page.url, encodeInt64((seen ? decodeInt64(seen) : 0n) + 1n));
      },
      onBatch(_ctx, versions) {
        if (new Set(versions.map((v) => v.url)).size < versions.length) batchesWithTwoVersions++;
      },
      async query(reads, _q: 'state') {
        const outlinks = new Map<string, string[]>();
        for await (const [key] of reads.iterate('outlinks')) {
          const [source, target] = key.toString().split('\u0000') as [string, string];
          outlinks.set(source, [...(outlinks.get(source) ?? []), target]);
        }
        const versions = new Map<string, number>();
        for await (const [url, n] of reads.iterate('versions')) versions.set(url.toString(), Number(decodeInt64(n)));
        return { outlinks, versions };
      },
    })
    .stage('backlinks', {
      input: links,
      columnFamilies: { indegree: { mergeOperator: int64Add() } },
      onMessage: (ctx, l) => ctx.writes.merge('indegree', l.target, encodeInt64(l.op === 'add' ? 1 : -1)),
      async query(reads, _q: 'indegree') {
        const out = new Map<string, number>();
        for await (const [target, n] of reads.iterate('indegree')) if (decodeInt64(n) !== 0n) out.set(target.toString(), Number(decodeInt64(n)));
        return out;
      },
    });
  const running = await topology.start({ broker, dataDir: dir, logger: quiet, chaos: ChaosPolicy.create({ rate: 0.05, seed: 7 }) });
  try {
    const producer = await running.producer(pages, 'crawler');
    const urls = Array.from({ length: 24 }, (_, i) => `http://h${i % 6}.example/p${i}`);
    const targets = Array.from({ length: 40 }, (_, i) => `http://t${i % 9}.example/t${i}`);
    let seed = 11;
    const rand = (k: number) => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 8) % k;
    const finalOutlinks = new Map<string, string[]>();
    const versionsSent = new Map<string, number>();
    for (let i = 0; i < 600; i++) {
      const url = urls[rand(urls.length)]!;
      const outlinks = [...new Set(Array.from({ length: rand(8) }, () => targets[rand(targets.length)]!))];
      await producer.send({ url, outlinks });
      finalOutlinks.set(url, outlinks);
      versionsSent.set(url, (versionsSent.get(url) ?? 0) + 1);
    }
    await running.quiescence({ timeoutMs: 180_000 });

    assert.ok(batchesWithTwoVersions > 0, 'some batch held two versions of one page');
    const states = await running.askAll('pages', 'state');
    const stored = new Map(states.flatMap((s) => [...s.outlinks]));
    const wantOutlinks = new Map([...finalOutlinks].filter(([, t]) => t.length > 0).map(([u, t]) => [u, [...t].sort()]));
    assert.deepEqual(new Map([...stored].map(([u, t]) => [u, t.sort()])), wantOutlinks, 'outlinks are the last version of each page');
    assert.deepEqual(new Map(states.flatMap((s) => [...s.versions])), versionsSent, 'get + put counted every version once');
    const indegree = new Map<string, number>();
    for (const ts of finalOutlinks.values()) for (const t of ts) indegree.set(t, (indegree.get(t) ?? 0) + 1);
    const got = new Map((await running.askAll('backlinks', 'indegree')).flatMap((m) => [...m]));
    assert.deepEqual(got, indegree, 'the add / remove operations sum to the in-degree of the last versions');
    assert.deepEqual(await running.deadLetters('pages'), []);
  } finally {
    await running.stop();
    await broker.close();
    cleanup();
  }
});
