import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { Packr } from 'msgpackr';
import { resetInFlightState } from '../src/actors/partition/repair.js';
import { ColumnFamilies, partitionColumnFamilies, type FrontierEntry, type PageRecord } from '../src/actors/partition/schema.js';
import { Store } from '../src/storage/index.js';
import { tempDir } from './kit/datasets.js';

// A demo killed mid-crawl (twice in a row, over the in-memory broker) ended its re-run with
// exit 0, "converged", 5,774 of hollins' 6,012 pages and L1 7e-2: the crawl policy had
// taken in fetch results (frontier state `fetched`) that the indexer, which consumes
// `fetches/<p>` on its own subscription, never stored, and the repair requeued only URLs
// in state `requested`. The repair must requeue a `fetched` URL whose page record is
// missing or older than the result the policy recorded, and only those.

const packr = new Packr({ useRecords: false });

test('the repair requeues URLs whose fetch result the crawl policy took in and the indexer did not store', async () => {
  const { dir, cleanup } = tempDir('shardflow-requeue-');
  const store = await Store.open({ path: join(dir, 'p0'), columnFamilies: partitionColumnFamilies(), createIfMissing: true });
  try {
    const frontier = (url: string, entry: FrontierEntry) => store.put(ColumnFamilies.frontier, url, packr.pack(entry));
    const page = (url: string, fetchedAt: number) =>
      store.put(ColumnFamilies.pages, url, packr.pack({ url, status: 200, fetchedAt, outlinkCount: 0 } satisfies PageRecord));
    const fetched = (fetchedAt: number): FrontierEntry => ({ requestedAt: fetchedAt - 10, state: 'fetched', fetchedAt, status: 200, fetches: 1, dueAt: fetchedAt + 1e9 });
    await frontier('http://a.test/indexed', fetched(1000));
    await page('http://a.test/indexed', 1000);
    await frontier('http://a.test/never-indexed', fetched(1000));
    await frontier('http://a.test/recrawl-not-indexed', fetched(2000));
    await page('http://a.test/recrawl-not-indexed', 1000);
    await frontier('http://a.test/out', { requestedAt: 500, state: 'requested' });
    await frontier('http://a.test/waiting', { requestedAt: 0, state: 'queued', priority: 1 });
    await frontier('http://a.test/blocked', { requestedAt: 0, state: 'blocked', dueAt: 5000 });

    const reset = await resetInFlightState(store, 0.15);

    const states: Record<string, string | undefined> = {};
    for await (const [key, value] of store.iterate(ColumnFamilies.frontier)) states[key.toString('utf8')] = (packr.unpack(value) as FrontierEntry).state;
    assert.deepEqual(states, {
      'http://a.test/blocked': 'blocked',
      'http://a.test/indexed': 'fetched',
      'http://a.test/never-indexed': 'queued',
      'http://a.test/out': 'queued',
      'http://a.test/recrawl-not-indexed': 'queued',
      'http://a.test/waiting': 'queued',
    });
    assert.equal(reset.requeued, 3, 'requested, never indexed, recrawl result not indexed');
  } finally {
    await store.close();
    cleanup();
  }
});
