import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { partitionColumnFamilies } from '../src/actors/partition/schema.js';
import { decodeFloat64s, decodeInt64, encodeFloat64s, encodeInt64, float64Add, int64Add } from '../src/operators/mergeOperators.js';
import { SharedResources, Store } from '../src/storage/index.js';
import { benchOptions } from './lib/options.js';

/** Top-level fields of the result line besides bench/run.mjs's (checked by test/bench.smoke.test.ts). */
export const resultFields = ['smoke', 'params', 'puts', 'gets', 'multiGet', 'merges', 'rmw', 'unbatchedMergeOverRmw', 'batchedMergeMany', 'batchedRmw', 'mergeOverRmw', 'cpuNanosPerUpdate', 'float64', 'indexedBatch', 'scan', 'manyStores'] as const;

/**
 * Storage throughput on one store and memory with many stores.
 *
 * One store (temp dir, 16-byte keys, 100-byte values, `--concurrency` operations in flight):
 * - puts, gets (random keys), multiGet (batches of `--multiget` keys): ops/s, p50/p99 µs
 * - counters, the same int64 counter updates over the same `--counters` keys (default
 *   400000, each present and flushed to SST files first, so that reads are not all
 *   memtable hits) three ways, each side by side with JS read-modify-write (RMW) done
 *   with the same binding:
 *   - `merges` vs `rmw`: one call per update (`store.merge` vs `store.get` + decode
 *     + add + `store.put`; single writes are group-committed, src/storage/internal/writeGroup.ts), `--concurrency` in flight, each RMW worker owning its keys so
 *     no update is lost; `unbatchedMergeOverRmw` = merges/s / rmw/s;
 *   - batched, as the main job writes (`--batch` updates per write, `--writers` writers in
 *     flight, each owning its keys; default 1, as a partition's metric actor is the one
 *     writer of its contributions; with more writers than cores, RMW's reads run on cores
 *     the merge path leaves idle, and the ratio measures idle cores, not cost: on 2 cores
 *     with 4 writers it fell to 1.5-1.7 while CPU per update stayed 2.45x): `batchedMerges` (one `batch.merge` per update),
 *     `batchedMergeMany` (one `batch.mergeMany` per write) vs `batchedRmw` (one `multiGet`
 *     of the batch's keys, decode + add in JS, one `batch.put` per key, one write), and
 *     `indexedBatch`: `batchedMerges` recorded into a read-your-writes batch
 *     (`store.indexedBatch()`, RocksDB's WriteBatchWithIndex: what a stream stage's batch
 *     is) against a plain one, rates and CPU per update side by side;
 *     `mergeOverRmw` = batchedMergeMany / batchedRmw, the like-for-like ratio (both sides
 *     batched; the done-when of issue 3 asks >= 2);
 *   - float64 [0, delta] contributions into a float64Add family (the metric's `ranks`):
 *     `float64.mergePerKey` (`batch.merge` + `encodeFloat64s` per update),
 *     `float64.mergeFloat64s` (one `batch.mergeFloat64s` per write, no Buffer per operand)
 *     vs `float64.rmw` (multiGet + decode + add + put, batched the same way).
 * - scan: keys/s through `chunks()`
 *
 * Many stores: `--stores` stores (default 64) on one SharedResources of `--budget-mb` MiB
 * (default 256), each with the column families of a partition (src/actors/partition/schema.ts);
 * `--per-store-mb` MiB (default 4) written into each, then read back. Reports RSS before,
 * after open, peak (sampled every 20 ms), the budget, the fixed per-store bytes charged to
 * it (Resources::kStoreFixedBytes + kColumnFamilyFixedBytes per family) and the shared usage.
 *
 * Args: `--ops N` (default 100000), `--concurrency C` (64), `--batch B` (1000), `--multiget M` (100),
 * `--writers W` (1), `--rounds R` (3: batched ways run in turns R times, medians reported),
 * `--stores S`, `--budget-mb M`, `--per-store-mb M`, `--counters K`.
 * `--smoke` (bench/lib/options.ts): 2,000 ops, 16 in flight, batches of 100, multiGet of 20,
 * 4,000 counters, 1 round, 4 stores on 64 MiB with 1 MiB each.
 */
export async function run(args: string[]): Promise<Record<string, unknown>> {
  const o = benchOptions(args);
  const ops = o.number('--ops', 100_000, 2_000);
  const concurrency = o.number('--concurrency', 64, 16);
  const batchSize = o.number('--batch', 1000, 100);
  const multiGetSize = o.number('--multiget', 100, 20);
  const writers = o.number('--writers', 1);
  const rounds = o.number('--rounds', 3, 1);
  const stores = o.number('--stores', 64, 4);
  const budgetMb = o.number('--budget-mb', 256, 64);
  const perStoreMb = o.number('--per-store-mb', 4, 1);
  const counters = o.number('--counters', 400_000, 4_000);

  const dir = await mkdtemp(path.join(tmpdir(), 'shardflow-bench-storage-'));
  try {
    const single = await singleStore(dir, { ops, concurrency, batchSize, multiGetSize, writers, rounds, counters });
    const many = await manyStores(dir, { stores, budgetMb, perStoreMb });
    return {
      smoke: o.smoke,
      params: { ops, concurrency, batchSize, multiGetSize, writers, rounds, counters, valueBytes: VALUE_BYTES, stores, budgetMb, perStoreMb },
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
  o: { ops: number; concurrency: number; batchSize: number; multiGetSize: number; writers: number; rounds: number; counters: number },
): Promise<Record<string, unknown>> {
  const store = await Store.open({
    path: path.join(dir, 'single'),
    columnFamilies: {
      data: {},
      counts: { mergeOperator: int64Add() },
      icounts: { mergeOperator: int64Add() },
      rmw: {},
      fcounts: { mergeOperator: float64Add() },
      frmw: {},
    },
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

    // Counter updates over the same key space both ways: `--counters` keys, a multiple of
    // the concurrency so that each read-modify-write worker owns its keys. Every key
    // exists before the runs and the store is flushed: like a partition's counters, most
    // live in SST files (the key space is several memtables), not in the memtable where
    // a read is cheapest.
    const counters = Math.max(1, Math.floor(o.counters / o.concurrency)) * o.concurrency;
    const one = encodeInt64(1);
    const zeros = encodeFloat64s(0, 0);
    for (let base = 0; base < counters; base += 1000) {
      const keys = Array.from({ length: Math.min(1000, counters - base) }, (_, i) => key(base + i));
      const batch = store.batch().mergeMany('counts', keys, one).mergeMany('icounts', keys, one).mergeMany('fcounts', keys, zeros);
      for (const k of keys) batch.put('rmw', k, one).put('frmw', k, zeros);
      await store.write(batch);
    }
    await store.flush();
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

    // Batched, as the main job writes: `writers` writers, writer w owns the keys congruent
    // to w mod writers (so RMW never races), `batchSize` distinct keys per write, drawn at
    // random from the writer's keys and sorted (the main job writes its contributions to
    // random pages, in key order). Every way writes the same planned batches.
    const writers = Math.min(o.writers, counters);
    const perWriterKeys = Math.floor(counters / writers);
    const batchSize = Math.min(o.batchSize, perWriterKeys);
    const perWriter = Math.max(1, Math.floor(o.ops / writers / batchSize));
    const pick = rng(7);
    const plan = Array.from({ length: writers }, (_, w) =>
      Array.from({ length: perWriter }, () => {
        const chosen = new Set<number>();
        while (chosen.size < batchSize) chosen.add(Math.floor(pick() * perWriterKeys) * writers + w);
        return [...chosen].sort((x, y) => x - y).map(key);
      }),
    );
    const batched = async (op: (keys: string[], w: number, b: number) => Promise<void>): Promise<number> => {
      const started = process.hrtime.bigint();
      await Promise.all(
        Array.from({ length: writers }, async (_, w) => {
          for (let b = 0; b < perWriter; b++) await op(plan[w]![b]!, w, b);
        }),
      );
      return Math.round((perWriter * writers * batchSize) / (Number(process.hrtime.bigint() - started) / 1e9));
    };
    // The machine's load changes while the bench runs: the ways to update run in turns,
    // `--rounds` times, and each reports its median rate, so both sides of a ratio saw
    // the same conditions.
    const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1]!;
    // Also the process CPU time (all threads: JS, libuv pool, RocksDB's flushes and
    // compactions) per update, median over the rounds: unlike rates, it hardly moves when
    // other processes load the machine.
    const updatesPerRun = Math.max(1, Math.floor(o.ops / writers / batchSize)) * writers * batchSize;
    const cpuNanosPerUpdate: Record<string, number> = {};
    const inTurns = async (ways: Record<string, () => Promise<number>>): Promise<Record<string, number>> => {
      const rates: Record<string, number[]> = Object.fromEntries(Object.keys(ways).map((k) => [k, []]));
      const cpus: Record<string, number[]> = Object.fromEntries(Object.keys(ways).map((k) => [k, []]));
      for (let r = 0; r < o.rounds; r++) {
        for (const [name, way] of Object.entries(ways)) {
          const cpu0 = process.cpuUsage();
          rates[name]!.push(await way());
          const cpu = process.cpuUsage(cpu0);
          cpus[name]!.push(((cpu.user + cpu.system) * 1000) / updatesPerRun);
        }
      }
      for (const [k, v] of Object.entries(cpus)) cpuNanosPerUpdate[k] = Math.round(median(v));
      return Object.fromEntries(Object.entries(rates).map(([k, v]) => [k, median(v)]));
    };
    const checked = new Map([key(0), key(counters - 1)].map((k) => [k, 0n]));
    let rmwRuns = 0;
    const counterRates = await inTurns({
      batchedMerges: () =>
        batched(async (keys) => {
          const batch = store.batch();
          for (const k of keys) batch.merge('counts', k, one);
          await store.write(batch);
        }),
      batchedMergeMany: () =>
        batched(async (keys) => {
          await store.write(store.batch().mergeMany('counts', keys, one));
        }),
      batchedMergesIndexed: () =>
        batched(async (keys) => {
          const batch = store.indexedBatch();
          for (const k of keys) batch.merge('icounts', k, one);
          await store.write(batch);
        }),
      batchedRmw: () => {
        rmwRuns++;
        return batched(async (keys) => {
          const olds = await store.multiGet('rmw', keys);
          const batch = store.batch();
          for (let i = 0; i < keys.length; i++) {
            const seen = checked.get(keys[i]!);
            if (seen !== undefined) checked.set(keys[i]!, seen + 1n);
            const old = olds[i];
            batch.put('rmw', keys[i]!, encodeInt64((old === undefined ? 0n : decodeInt64(old)) + 1n));
          }
          await store.write(batch);
        });
      },
    });
    const { batchedMerges, batchedMergeMany, batchedMergesIndexed, batchedRmw } = counterRates as Record<string, number>;
    // Every batched run updates each key the same number of times (n = checked / rmwRuns):
    // counts got the unbatched merges + 2 x rounds runs, rmw the unbatched RMW + rounds.
    for (const [k, total] of checked) {
      const a = decodeInt64((await store.get('counts', k))!);
      const b = decodeInt64((await store.get('rmw', k))!);
      const perRun = total / BigInt(rmwRuns);
      if (a - b !== perRun * BigInt(rmwRuns)) throw new Error(`batched merge and read-modify-write disagree for ${k}: ${a} - ${b}`);
      const indexed = decodeInt64((await store.get('icounts', k))!);
      if (indexed - 1n !== perRun * BigInt(rmwRuns)) throw new Error(`indexed batches counted ${indexed - 1n} for ${k}, plain ones ${perRun * BigInt(rmwRuns)}`);
    }

    // Float64 [0, delta] contributions, as the metric merges them into `ranks`.
    const deltaOf = (w: number, b: number, i: number) => ((w * 31 + b * 7 + i) % 13) / 1024;
    const floatRates = await inTurns({
      float64MergePerKey: () => batched(async (keys, w, b) => {
        const batch = store.batch();
        for (let i = 0; i < keys.length; i++) batch.merge('fcounts', keys[i]!, encodeFloat64s(0, deltaOf(w, b, i)));
        await store.write(batch);
      }),
      float64MergeFloat64s: () => batched(async (keys, w, b) => {
        const values = new Float64Array(keys.length * 2);
        for (let i = 0; i < keys.length; i++) values[2 * i + 1] = deltaOf(w, b, i);
        await store.write(store.batch().mergeFloat64s('fcounts', keys, values, 2));
      }),
      float64Rmw: () => batched(async (keys, w, b) => {
        const olds = await store.multiGet('frmw', keys);
        const batch = store.batch();
        for (let i = 0; i < keys.length; i++) {
          const old = olds[i];
          const [x, r] = old === undefined ? [0, 0] : decodeFloat64s(old);
          batch.put('frmw', keys[i]!, encodeFloat64s(x!, r! + 2 * deltaOf(w, b, i)));
        }
        await store.write(batch);
      }),
    });
    const { float64MergePerKey, float64MergeFloat64s, float64Rmw } = floatRates as Record<string, number>;
    // Each way added each delta `rounds` times (RMW adds 2 x delta per run): the values agree (up to float rounding order).
    for (const k of [0, counters - 1]) {
      const a = decodeFloat64s((await store.get('fcounts', key(k)))!)[1]!;
      const b = decodeFloat64s((await store.get('frmw', key(k)))!)[1]!;
      if (Math.abs(a - b) > 1e-9 * Math.max(1, Math.abs(a))) throw new Error(`float64 merge ${a} vs read-modify-write ${b} for ${key(k)}`);
    }

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
      unbatchedMergeOverRmw: Number((merges.opsPerSec / rmwPerSec).toFixed(2)),
      batchedMerges: { opsPerSec: batchedMerges },
      batchedMergeMany: { opsPerSec: batchedMergeMany },
      batchedRmw: { updatesPerSec: batchedRmw },
      mergeOverRmw: Number((batchedMergeMany / batchedRmw).toFixed(2)),
      /** Process CPU ns per update of each batched way (median of the rounds), and RMW / mergeMany. */
      cpuNanosPerUpdate,
      cpuRmwOverMerge: Number((cpuNanosPerUpdate.batchedRmw! / cpuNanosPerUpdate.batchedMergeMany!).toFixed(2)),
      cpuFloat64RmwOverMergeFloat64s: Number((cpuNanosPerUpdate.float64Rmw! / cpuNanosPerUpdate.float64MergeFloat64s!).toFixed(2)),
      batchedMergeOverRmw: Number((batchedMerges / batchedRmw).toFixed(2)),
      float64: {
        mergePerKey: { opsPerSec: float64MergePerKey },
        mergeFloat64s: { opsPerSec: float64MergeFloat64s },
        rmw: { updatesPerSec: float64Rmw },
        mergeFloat64sOverRmw: Number((float64MergeFloat64s / float64Rmw).toFixed(2)),
      },
      /** Merges recorded per key into an indexed (read-your-writes) batch vs a plain one: rates, CPU ns per update, plain / indexed. */
      indexedBatch: {
        plain: { opsPerSec: batchedMerges, cpuNanosPerUpdate: cpuNanosPerUpdate.batchedMerges },
        indexed: { opsPerSec: batchedMergesIndexed, cpuNanosPerUpdate: cpuNanosPerUpdate.batchedMergesIndexed },
        plainOverIndexed: Number((batchedMerges / batchedMergesIndexed).toFixed(2)),
        cpuIndexedOverPlain: Number((cpuNanosPerUpdate.batchedMergesIndexed! / cpuNanosPerUpdate.batchedMerges!).toFixed(2)),
      },
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
  const rssBefore = process.memoryUsage.rss();
  let rssPeak = rssBefore;
  const sampler = setInterval(() => {
    rssPeak = Math.max(rssPeak, process.memoryUsage.rss());
  }, 20);
  const resources = SharedResources.create({ memoryBudgetBytes: o.budgetMb * 2 ** 20 });
  const opened: Store[] = [];
  const started = process.hrtime.bigint();
  try {
    for (let s = 0; s < o.stores; s++) {
      opened.push(
        await Store.open({
          path: path.join(dir, `many-${s}`),
          columnFamilies: partitionColumnFamilies(),
          resources,
        }),
      );
    }
    const rssOpen = process.memoryUsage.rss();
    const value = Buffer.alloc(1000, 3);
    const rank = encodeFloat64s(0, 0.15);
    const perStore = Math.floor((o.perStoreMb * 2 ** 20) / value.length);
    // Write in rounds across all stores, so every memtable fills at once (worst case);
    // 128 entries (128 KiB) a write, as a partition's actors write: what the batches in
    // flight hold (64 x 128 KiB, plus their native copies) is the application's memory,
    // not RocksDB's, yet counts in the RSS measured here.
    const chunk = 128;
    for (let base = 0; base < perStore; base += chunk) {
      await Promise.all(
        opened.map((store) => {
          const batch = store.batch();
          for (let i = base; i < Math.min(perStore, base + chunk); i++) {
            batch.put(i % 2 ? 'pages' : 'outlinks', key(i), value).merge('ranks', key(i), rank);
          }
          return store.write(batch);
        }),
      );
      rssPeak = Math.max(rssPeak, process.memoryUsage.rss());
    }
    const usageAfterWrite = resources.usage();
    const rssPeakWrite = rssPeak;
    const rssAfterWrite = process.memoryUsage.rss();
    // Read everything back through the shared cache.
    for (const store of opened) {
      for await (const _ of store.chunks('pages', { chunkSize: 4096 })) rssPeak = Math.max(rssPeak, process.memoryUsage.rss());
    }
    const usageAfterRead = resources.usage();
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    rssPeak = Math.max(rssPeak, process.memoryUsage.rss());
    const budget = o.budgetMb * 2 ** 20;
    const fixed = opened.reduce((sum, s) => sum + (s.stats().fixedBytes as number), 0);
    return {
      stores: opened.length,
      columnFamiliesPerStore: Object.keys(partitionColumnFamilies()).length,
      budgetBytes: budget,
      // RocksDB's per-store memory outside cache and memtables, charged to the budget at open.
      fixedBytesCharged: fixed,
      fixedBytesPerStore: Math.round(fixed / opened.length),
      rssOpenGrowthBytes: rssOpen - rssBefore,
      writtenBytes: opened.length * perStore * value.length,
      rssBeforeBytes: rssBefore,
      rssAfterOpenBytes: rssOpen,
      rssPeakBytes: rssPeak,
      rssPeakWriteBytes: rssPeakWrite,
      rssAfterWriteBytes: rssAfterWrite,
      rssPeakGrowthBytes: rssPeak - rssBefore,
      /** (peak RSS - RSS before) / budget: <= 1 means the 64 stores stayed within the budget. */
      rssPeakOverBudget: Number(((rssPeak - rssBefore) / budget).toFixed(2)),
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
