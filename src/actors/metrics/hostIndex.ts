import { Packr } from 'msgpackr';
import type { Store } from '../../storage/index.js';
import { hostOf } from '../../index.js';
import { walkLivePages } from '../partition/livePages.js';
import { ColumnFamilies, HOST_INDEX_TOTAL, type HostIndexTotal, type HostRecord } from '../partition/schema.js';

const packr = new Packr({ useRecords: false });

/**
 * Rewrites a partition's `hosts` index from one consistent walk of its live pages and ranks:
 * per host, its pages, the sum of their scores (authority) and the best page; and the
 * partition's total in `meta`. One write batch, so readers see the old index or the new one.
 * Hosts without live pages any more are deleted. Run by the metric actor when the metric
 * has converged (`WebIndex.converge`), under the graph lock.
 * @param now wall-clock ms recorded as `at`
 * @returns the new partition totals
 */
export async function refreshHostIndex(store: Store, now: number): Promise<HostIndexTotal> {
  const snapshot = store.snapshot();
  const hosts = new Map<string, { pages: number; sum: number; max: number; best: string }>();
  let total = 0;
  let pages = 0;
  const batch = store.batch();
  try {
    await walkLivePages(
      store,
      (url, score) => {
        total += score;
        pages++;
        let host: string;
        try {
          host = hostOf(url);
        } catch {
          return; // a URL without a host part: counted in the total, in no host
        }
        const h = hosts.get(host);
        if (!h) hosts.set(host, { pages: 1, sum: score, max: score, best: url });
        else {
          h.pages++;
          h.sum += score;
          if (score > h.max || (score === h.max && url < h.best)) {
            h.max = score;
            h.best = url;
          }
        }
      },
      { snapshot },
    );
    for await (const { keys } of store.chunks(ColumnFamilies.hosts, { snapshot, keysOnly: true, chunkSize: 4096 })) {
      for (const k of keys) if (!hosts.has(k.toString('utf8'))) batch.delete(ColumnFamilies.hosts, k);
    }
  } finally {
    snapshot.release();
  }
  for (const [host, h] of hosts) batch.put(ColumnFamilies.hosts, host, packr.pack(h satisfies HostRecord));
  const totals: HostIndexTotal = { total, pages, hosts: hosts.size, at: now };
  batch.put(ColumnFamilies.meta, HOST_INDEX_TOTAL, packr.pack(totals));
  await store.write(batch);
  return totals;
}

/** The partition's hosts index: totals (undefined before the first refresh) and every host record. */
export async function readHostIndex(store: Store): Promise<{ totals: HostIndexTotal | undefined; hosts: Array<[string, HostRecord]> }> {
  const snapshot = store.snapshot();
  try {
    const t = await store.get(ColumnFamilies.meta, HOST_INDEX_TOTAL, { snapshot });
    const hosts: Array<[string, HostRecord]> = [];
    for await (const { keys, values } of store.chunks(ColumnFamilies.hosts, { snapshot, chunkSize: 4096 })) {
      for (let i = 0; i < keys.length; i++) hosts.push([keys[i]!.toString('utf8'), packr.unpack(values[i]!) as HostRecord]);
    }
    return { totals: t ? (packr.unpack(t) as HostIndexTotal) : undefined, hosts };
  } finally {
    snapshot.release();
  }
}
