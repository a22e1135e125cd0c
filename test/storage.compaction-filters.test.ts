import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { dropPrefixes, tombstones, ttl } from '../src/operators/compactionFilters.js';
import { encodeLww, encodeRecord, lwwTombstone } from '../src/operators/mergeOperators.js';
import { Store } from '../src/storage/index.js';

// Filters compare against the wall clock at compaction time, so the data is placed far
// (hours) on either side of the cut-off and the test does not depend on timing.
const HOUR = 3_600_000;
let dir: string;
let store: Store;
before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'shardflow-filters-'));
  store = await Store.open({
    path: path.join(dir, 'db'),
    columnFamilies: {
      pages: { compactionFilter: ttl({ field: 'fetchedAt', ttlMs: 24 * HOUR }) },
      latest: { compactionFilter: tombstones({ graceMs: HOUR }) },
      links: { compactionFilter: dropPrefixes(['gone.example/', Buffer.from('x-')]) },
    },
  });
});
after(async () => {
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

describe('compaction filters', () => {
  it('ttl drops records whose timestamp field is older than ttlMs, keeps the rest', async () => {
    const now = Date.now();
    await store.put('pages', 'old', encodeRecord({ fetchedAt: now - 48 * HOUR, status: 200 }));
    await store.put('pages', 'old-date', encodeRecord({ fetchedAt: new Date(now - 48 * HOUR) }));
    await store.put('pages', 'fresh', encodeRecord({ fetchedAt: now, status: 200 }));
    await store.put('pages', 'no-field', encodeRecord({ status: 404 }));
    await store.put('pages', 'not-msgpack', Buffer.from([0xc1]));
    await store.flush();
    await store.compactRange('pages');
    assert.equal(await store.get('pages', 'old'), undefined);
    assert.equal(await store.get('pages', 'old-date'), undefined);
    assert.ok(await store.get('pages', 'fresh'));
    assert.ok(await store.get('pages', 'no-field'));
    assert.ok(await store.get('pages', 'not-msgpack'));
    const cf = store.stats().columnFamilies.pages!;
    assert.equal(cf.filterDropped, 2);
    assert.ok(cf.filterExamined >= 5);
  });

  it('tombstones drops lww tombstones older than the grace period only', async () => {
    const now = Date.now();
    await store.put('latest', 'dead-long-ago', lwwTombstone(now - 2 * HOUR));
    await store.put('latest', 'dead-just-now', lwwTombstone(now));
    await store.put('latest', 'alive-old', encodeLww(now - 2 * HOUR, Buffer.from('v')));
    await store.flush();
    await store.compactRange('latest');
    assert.equal(await store.get('latest', 'dead-long-ago'), undefined);
    assert.ok(await store.get('latest', 'dead-just-now'));
    assert.ok(await store.get('latest', 'alive-old'));
    assert.equal(store.stats().columnFamilies.latest!.filterDropped, 1);
  });

  it('dropPrefixes drops every key under the prefixes', async () => {
    for (const k of ['gone.example/a', 'gone.example/b', 'x-1', 'kept.example/a', 'gone.exampl']) {
      await store.put('links', k, Buffer.from('v'));
    }
    await store.flush();
    await store.compactRange('links');
    const left: string[] = [];
    for await (const [k] of store.iterate('links')) left.push(k.toString());
    assert.deepEqual(left, ['gone.exampl', 'kept.example/a']);
    assert.equal(store.stats().columnFamilies.links!.filterDropped, 3);
  });

  it('drops values even under a live snapshot (RocksDB ignores snapshots for filters, as documented)', async () => {
    await store.put('links', 'x-snap', Buffer.from('v'));
    const snap = store.snapshot();
    assert.deepEqual(await store.get('links', 'x-snap', { snapshot: snap }), Buffer.from('v'));
    await store.flush();
    await store.compactRange('links');
    assert.equal(await store.get('links', 'x-snap', { snapshot: snap }), undefined);
    snap.release();
  });

  it('rejects bad filter parameters at open', async () => {
    await assert.rejects(
      Store.open({ path: path.join(dir, 'bad'), columnFamilies: { c: { compactionFilter: ttl({ field: 'f', ttlMs: 0 }) } } }),
      { code: 'SF_ERR_INVALID_ARGUMENT' },
    );
  });
});
