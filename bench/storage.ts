import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { decodeInt64, encodeInt64, int64Add } from '../src/operators/mergeOperators.js';
import { SharedResources, Store } from '../src/storage/index.js';

/**
 * Storage throughput on one store and memory with many stores.
 *
 * One store (temp dir, 16-byte keys, 100-byte values, `--concurrency` operations in flight):
 * - puts, gets (random keys), multiGet (batches of `--multiget` keys): ops/s, p50/p99 µs
 * - merges: int64 add merges, one native call each
 * - rmw: the same counter updates done in JS as get + decode + add + put, one key per
 *   worker at a time so no update is lost; `mergeOverRmw` = merges/s / rmw/s
 * - batchedMerges: merges in write batches of `--batch` (the consumer path)
 * - scan: keys/s through `chunks()`
 *
 * Many stores: `--stores` stores (default 64) on one SharedResources of `--budget-mb` MiB
 * (default 256), each with 4 column families; `--per-store-mb` MiB (default 4) written into each,
 * then read back. Reports RSS before, peak (sampled every 20 ms) and the shared usage.
 *
 * Args: `--ops N` (default 100000), `--concurrency C` (64), `--batch B` (1000), `--multiget M` (100).
 */
export async function run(args: string[]): Promise<Record<string, unknown>> {
  const arg = (name: string, fallback: number): number => {
    const i = args.indexOf(name);
    const value = i >= 0 ? Number(args[i + 1]) : fallback;
    if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} needs a positive number`);
    return value;
  };
  const ops = arg('--ops', 100_000);
  const concurrency = arg('--concurrency', 64);
  const batchSize = arg('--batch', 1000);
  const multiGetSize = arg('--multiget', 100);
  const stores = arg('--stores', 64);
  const budgetMb = arg('--budget-mb', 256);
  const perStoreMb = arg('--per-store-mb', 4);

  const dir = await mkdtemp(path.join(tmpdir(), 'shardflow-bench-storage-'));
  try {
    const single = await singleStore(dir, { ops, concurrency, batchSize, multiGetSize });
    const many = await manyStores(dir, { stores, budgetMb, perStoreMb });
    return {
      params: { ops, concurrency, batchSize, multiGetSize, valueBytes: VALUE_BYTES, stores, budgetMb, perStoreMb },
      ...single,
      manyStores: many,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const VALUE_BYTES = 100;
const key = (i: number) => `key:${String(i).padStart(12, '0')}`;

/** Seeded xorshift for key choice. */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 4294967296;
  };
}

interface Rate {
  opsPerSec: number;
  p50Micros?: number;
  p99Micros?: number;
}

/** Runs `total` operations with `concurrency` in flight; latency per op. */
async function measure(total: number, concurrency: number, op: (i: number) => Promise<unknown>): Promise<Rate> {
  const latencies = new Float64Array(total);
  let next = 0;
  const started = process.hrtime.bigint();
  const worker = async () => {
    for (let i = next++; i < total; i = next++) {
      const t0 = process.hrtime.bigint();
      await op(i);
      latencies[i] = Number(process.hrtime.bigint() - t0) / 1000;
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, worker));
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  latencies.sort();
  return {
    opsPerSec: Math.round(total / seconds),
    p50Micros: Math.round(latencies[Math.floor(total * 0.5)]!),
    p99Micros: Math.round(latencies[Math.floor(total * 0.99)]!),
  };
}

async function singleStore(
  dir: string,
  o: { ops: number; concurrency: number; batchSize: number; multiGetSize: number },
): Promise<Record<string, unknown>> {
  const store = await Store.open({
    path: path.join(dir, 'single'),
    columnFamilies: { data: {}, counts: { mergeOperator: int64Add() }, rmw: {} },
    resources: SharedResources.create({ memoryBudgetBytes: 256 * 2 ** 20 }),
  });
  try {
    const value = Buffer.alloc(VALUE_BYTES, 7);
    const puts = await measure(o.ops, o.concurrency, (i) => store.put('data', key(i), value));
    const r = rng(1);
    const gets = await measure(o.ops, o.concurrency, () => store.get('data', key(Math.floor(r() * o.ops))));
    const multiGetCalls = Math.max(1, Math.floor(o.ops / o.multiGetSize));
    const mg = await measure(multiGetCalls, Math.min(o.concurrency, 8), () =>
      store.multiGet('data', Array.from({ length: o.multiGetSize }, () => key(Math.floor(r() * o.ops)))),
    );

    // Counter updates over the same key space both ways.
    // A multiple of the concurrency, so that each read-modify-write worker owns its keys.
    const counters = Math.max(1, Math.floor(o.ops / 10 / o.concurrency)) * o.concurrency;
    const one = encodeInt64(1);
    const merges = await measure(o.ops, o.concurrency, (i) => store.merge('counts', key(i % counters), one));
    // JS read-modify-write: worker w owns keys congruent to w, so updates never race.
    const rmwStarted = process.hrtime.bigint();
    await Promise.all(
      Array.from({ length: o.concurrency }, async (_, w) => {
        for (let i = w; i < o.ops; i += o.concurrency) {
          const k = key(i % counters);
          const old = await store.get('rmw', k);
          const n = old === undefined ? 0n : decodeInt64(old);
          await store.put('rmw', k, encodeInt64(n + 1n));
        }
      }),
    );
    const rmwPerSec = Math.round(o.ops / (Number(process.hrtime.bigint() - rmwStarted) / 1e9));
    // Sanity: both ways counted the same.
    for (const k of [0, counters - 1]) {
      const a = decodeInt64((await store.get('counts', key(k)))!);
      const b = decodeInt64((await store.get('rmw', key(k)))!);
      if (a !== b) throw new Error(`merge counted ${a}, read-modify-write ${b} for ${key(k)}`);
    }

    const batches = Math.max(1, Math.floor(o.ops / o.batchSize));
    const batchedStarted = process.hrtime.bigint();
    for (let b = 0; b < batches; b++) {
      const batch = store.batch();
      for (let i = 0; i < o.batchSize; i++) batch.merge('counts', key((b * o.batchSize + i) % counters), one);
      await store.write(batch);
    }
    const batchedMergesPerSec = Math.round((batches * o.batchSize) / (Number(process.hrtime.bigint() - batchedStarted) / 1e9));

    await store.flush();
    const scanStarted = process.hrtime.bigint();
    let scanned = 0;
    for await (const { keys } of store.chunks('data')) scanned += keys.length;
    const scanKeysPerSec = Math.round(scanned / (Number(process.hrtime.bigint() - scanStarted) / 1e9));

    return {
      puts,
      gets,
      multiGet: { keysPerSec: Math.round(mg.opsPerSec * o.multiGetSize), callP50Micros: mg.p50Micros, callP99Micros: mg.p99Micros },
      merges,
      rmw: { updatesPerSec: rmwPerSec },
      mergeOverRmw: Number((merges.opsPerSec / rmwPerSec).toFixed(2)),
      batchedMerges: { opsPerSec: batchedMergesPerSec },
      scan: { keysPerSec: scanKeysPerSec, keys: scanned },
    };
  } finally {
    await store.close();
  }
}

async function manyStores(
  dir: string,
  o: { stores: number; budgetMb: number; perStoreMb: number },
): Promise<Record<string, unknown>> {
  globalThis.gc?.();
  const rssBefore = process.memoryUsage().rss;
  let rssPeak = rssBefore;
  const sampler = setInterval(() => {
    rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
  }, 20);
  const resources = SharedResources.create({ memoryBudgetBytes: o.budgetMb * 2 ** 20 });
  const opened: Store[] = [];
  const started = process.hrtime.bigint();
  try {
    for (let s = 0; s < o.stores; s++) {
      opened.push(
        await Store.open({
          path: path.join(dir, `many-${s}`),
          columnFamilies: { pages: {}, links: {}, ranks: {}, meta: {} },
          resources,
        }),
      );
    }
    const rssOpen = process.memoryUsage().rss;
    const value = Buffer.alloc(1000, 3);
    const perStore = Math.floor((o.perStoreMb * 2 ** 20) / value.length);
    const chunk = 500;
    // Write in rounds across all stores, so every memtable fills at once (worst case).
    for (let base = 0; base < perStore; base += chunk) {
      await Promise.all(
        opened.map((store) => {
          const batch = store.batch();
          for (let i = base; i < Math.min(perStore, base + chunk); i++) batch.put(i % 2 ? 'pages' : 'links', key(i), value);
          return store.write(batch);
        }),
      );
      rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
    }
    const usageAfterWrite = resources.usage();
    // Read everything back through the shared cache.
    for (const store of opened) {
      for await (const _ of store.chunks('pages', { chunkSize: 4096 })) rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
    }
    const usageAfterRead = resources.usage();
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
    return {
      stores: opened.length,
      budgetBytes: o.budgetMb * 2 ** 20,
      writtenBytes: opened.length * perStore * value.length,
      rssBeforeBytes: rssBefore,
      rssAfterOpenBytes: rssOpen,
      rssPeakBytes: rssPeak,
      rssPeakOverBudget: Number(((rssPeak - rssBefore) / (o.budgetMb * 2 ** 20)).toFixed(2)),
      usageAfterWrite,
      usageAfterRead,
      seconds: Number(seconds.toFixed(1)),
    };
  } finally {
    clearInterval(sampler);
    await Promise.all(opened.map((s) => s.close()));
  }
}

// `tsx bench/storage.ts [args]` prints the same one JSON line the bench runner would.
if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(JSON.stringify({ name: 'storage', ...(await run(process.argv.slice(2))) }));
}
