import type { Behavior } from '../../runtime/actor/index.js';
import { producerId } from '../../runtime/ids.js';
import { Namespaces, topic } from '../../runtime/topics.js';
import type { Store } from '../../storage/index.js';
import { crawlRequestCodec } from '../messages.js';
import { Outbox } from '../partition/outbox.js';
import type { PartitionEnv } from '../partition/env.js';
import { ColumnFamilies, type FrontierEntry } from '../partition/schema.js';
import { Packr } from 'msgpackr';

/** Messages of the crawl policy. */
export type CrawlPolicyMessage =
  /** URLs to crawl from outside (seeds); they go through the same path as discovered ones. */
  | { readonly type: 'seed'; readonly urls: readonly string[] }
  /** New rows in `pending` (written by the backlinks actor): look at them. */
  | { readonly type: 'poke' };

interface CrawlPolicyState {
  readonly store: Store;
  readonly outbox: Outbox;
}

const packr = new Packr({ useRecords: false });
const REQUESTS_PER_MESSAGE = 32;
const SCAN_CHUNK = 1024;

/**
 * The crawl policy of one partition: the frontier of its hosts. Discovered URLs arrive as
 * rows in `pending` (written by the backlinks actor in the same write batch as the
 * backlink, so a discovery is never lost) or as seeds; the policy moves each URL it has not
 * requested before into `frontier` and places a crawl request in `crawl-requests/<p>`,
 * through the outbox, in one write batch. Politeness, robots.txt and recrawl intervals
 * come with the real-site crawler (issue 7); the replayed graph needs none.
 */
export function crawlPolicy(env: PartitionEnv): Behavior<CrawlPolicyMessage, CrawlPolicyState> {
  const owner = 'crawl-policy';
  const target = topic(Namespaces.crawlRequests, env.partition);
  return {
    kind: 'crawl-policy',
    async start() {
      const store = await env.store.acquire();
      try {
        const outbox = await Outbox.open({ store, broker: env.broker, owner, producer: producerId(`${owner}@${env.partition}`), counters: env.counters });
        return { store, outbox };
      } catch (err) {
        await env.store.release();
        throw err;
      }
    },
    async receive(state, message, ctx) {
      const { store, outbox } = state;
      if (message.type === 'seed') {
        const batch = store.batch();
        for (const url of message.urls) batch.put(ColumnFamilies.pending, url, new Uint8Array(0));
        await store.write(batch);
      }
      // Drain `pending` in chunks: each chunk is one write batch with its crawl requests.
      for (;;) {
        const keys: Buffer[] = [];
        for await (const [key] of store.iterate(ColumnFamilies.pending, { keysOnly: true, chunkSize: SCAN_CHUNK })) {
          keys.push(key);
          if (keys.length >= SCAN_CHUNK) break;
        }
        if (keys.length === 0) return;
        const known = await store.multiGet(ColumnFamilies.frontier, keys);
        const batch = store.batch();
        const fresh: string[] = [];
        const entry: FrontierEntry = { requestedAt: ctx.clock.now() };
        const value = packr.pack(entry);
        keys.forEach((key, i) => {
          batch.delete(ColumnFamilies.pending, key);
          if (known[i] !== undefined) return;
          batch.put(ColumnFamilies.frontier, key, value);
          fresh.push(key.toString('utf8'));
        });
        for (let i = 0; i < fresh.length; i += REQUESTS_PER_MESSAGE) {
          await outbox.enqueue(batch, target, crawlRequestCodec.encode({ type: 'crawl-requests', urls: fresh.slice(i, i + REQUESTS_PER_MESSAGE) }));
        }
        await store.write(batch);
        await outbox.publish();
      }
    },
    async stop(state) {
      await state.outbox.close();
      await env.store.release();
    },
  };
}
