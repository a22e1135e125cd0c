import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { DEFAULT_CHECKPOINT_WAL_BYTES_FOR_FLUSH, openCheckpointStore, Store, type CheckpointPutReport, type CheckpointStore } from '../src/storage/index.js';
import { s3Env, S3_BUCKET, s3Unavailable } from '../test/kit/s3.js';
import { benchOptions } from './lib/options.js';
import { int64Add, MemoryBroker, startWorker, type Worker, type WorkerEvent } from '../src/index.js';
import { stageColumnFamilies } from '../src/runtime/stream/reserved.js';
import { REDIS_URL, deleteKeys, redisUnavailable } from '../test/kit/cluster.js';
import { twoStageClicks } from '../test/kit/twoStageClicks.js';
import { existsSync } from 'node:fs';
import { cpus } from 'node:os';
import { readGraph, readScores } from '../src/replay/graphFile.js';
import { rankBenchOptions } from './lib/rankOptions.js';
import { spread, webIndexCheckpointBench } from './lib/webIndexCheckpoints.js';

/**
 * The smoke run's hang bound in test/bench.smoke.test.ts, ms: the web index part starts five
 * worker processes (each loads the CLI) and ranks polblogs twice, minutes
 * under a load of 20 on two cores.
 */
export const smokeHangMs = 420_000;

/** Top-level fields of the result line besides bench/run.mjs's (checked by test/bench.smoke.test.ts). */
export const resultFields = ['smoke', 'params', 'store', 'directory', 's3', 'smallPuts', 'plannedMove', 'webIndexCost', 'webIndexCheckpoints', 'webIndexMoves'] as const;

const VALUE_BYTES = 1024;
const BATCH = 1000;

/**
 * Incremental RocksDB checkpoints in the two checkpoint stores (src/checkpoint/,
 * docs/checkpoints.md), side by side on the same store.
 *
 * One store of `--mb` MiB (default 256; 1 KiB incompressible values under 16-byte keys,
 * written in batches of 1,000, flushed). Then, for the directory store (a temp folder,
 * `file:///`) and the S3 store (the S3 server of scripts/s3/start.sh, or the AWS_* environment):
 * - `full`: the first `put` (seconds to make the local checkpoint: flush + hard links; seconds
 *   to hash the files and store them with the manifest; bytes, files, bytes stored);
 * - `incremental`: the same after `--more` percent more writes (default 5): bytes stored
 *   should be about that share, the rest being the first put's SST files, shared;
 * - `restore`: seconds to fetch and check the latest checkpoint into a new folder (then
 *   opened, and one key read back, to know it is a store).
 * - `smallPuts`: the puts a web-index partition makes in its metric rounds, side by side for
 *   `walBytesForFlush` 0 (a memtable flush per put, as before) and the default (512 KiB: the live
 *   WAL copied): two identical stores of three column families (`--small-entries` keys
 *   written first, 40,000; smoke 4,000; flushed every tenth of them, so tens of SST files),
 *   then `--small-rounds` rounds (30; smoke 5) of 900 writes of 64-byte values spread over
 *   the three families, each followed by a put of each store, alternately, into each
 *   checkpoint store: medians of the local checkpoint's and the upload's seconds and of the
 *   bytes and files stored, the ratio of the medians (WAL copy over flush), and the live
 *   WAL's size at the last put. `--small-wal-bytes` (`0,default`) lists the values compared.
 * - `plannedMove`: one stage partition holding `--mb` MiB moved between two cluster workers
 *   with their own data dirs through the directory store (`startWorker({ checkpoints })`,
 *   Redis coordination, lease 2 s): seconds from the old owner's `released` to the new
 *   owner's `started` (the hand-back's last checkpoint was taken before the release; the new
 *   owner's restore is inside), and the restore alone. Skipped without Redis.
 * S3 is measured when reachable; otherwise its part says `skipped` with the reason, and with
 * `SHARDFLOW_REQUIRE_BROKERS=1` (CI) the run fails instead.
 *
 * The web index on worker processes (bench/lib/webIndexCheckpoints.ts; Redis as coordination
 * and broker; skipped without Redis), a graph of `--graph` (cnr-2000, 16 partitions; smoke:
 * polblogs, 4) ranked by `--wi-workers` processes (2) in one run:
 * - `webIndexCost`: the rank job on workers without `--checkpoints` (one shared data dir), then
 *   on workers with their own data dirs and `--checkpoints` in each of `--wi-stores` (`file,s3`;
 *   smoke `file`; s3 left out, with the reason, when the S3 server does not answer), then
 *   without again (`none`: the mean of the two, each in `none.runs`; the first run of a bench
 *   tends to be the slower): total,
 *   load and rounds seconds, L1, load averages, partitions fenced during the run (a lease that
 *   ran out: the partition restarted, so the ratio then compares more than checkpoints), each
 *   run's seconds over the runs without
 *   (target <= 1.1), and the puts the workers reported (`checkpointed` events) in the load
 *   and in the rounds (count, puts per partition per round, seconds, bytes stored each, and the objects their
 *   manifests were stored in: fewer than the puts with group commits).
 * - `webIndexCheckpoints` (the first store's run): each partition's latest checkpoint after
 *   the rank (bytes, files: min, median, max, total) and its restore into a new folder here
 *   (seconds), with the puts of the rank; `warm`: the same checkpoints warmed into a cache
 *   (`CheckpointStore.warm`, seconds) and restored from it (seconds, share of the bytes cached),
 *   side by side with the cold restores.
 * - `webIndexMoves` (same run, on the ranked state): a worker joins, the first leaves with
 *   SIGTERM, then one is SIGKILLed; per moved partition the seconds from `released` (or the
 *   kill, or the lease's expiry) to `started` and to the first read answered, the restores,
 *   the hand-backs' last checkpoints.
 * Args: `--graph`, `--partitions`, `--tolerance` (bench/lib/rankOptions.ts), `--wi-workers`,
 * `--wi-stores`, `--lease-ms` (3000; smoke 2000), `--checkpoint-interval-ms` (the worker's
 * default), `--wi-standbys` (warm standbys per partition of the workers with checkpoints, 1;
 * 0 for none: the cost runs include the standbys' fetches), `--parts` (`store,webIndex`: `store` is the parts above).
 *
 * Args: `--mb M` (256), `--more P` (5). `--smoke`: 2 MiB.
 */
export async function run(args: string[]): Promise<Record<string, unknown>> {
  const parts = new Set(benchOptions(args).string('--parts', 'store,webIndex').split(','));
  if ([...parts].some((p) => p !== 'store' && p !== 'webIndex')) throw new RangeError(`--parts needs a list of store, webIndex; got ${[...parts].join(',')}`);
  const notRun = { notRun: 'not in --parts' };
  const stores: Record<string, unknown> = parts.has('store')
    ? await storeParts(args)
    : { smoke: benchOptions(args).smoke, params: notRun, store: notRun, directory: notRun, s3: notRun, smallPuts: notRun, plannedMove: notRun };
  return { ...stores, ...(parts.has('webIndex') ? await webIndexParts(args) : { webIndexCost: notRun, webIndexCheckpoints: notRun, webIndexMoves: notRun }) };
}

/** The web index's part (see `run`): skipped, with the reason, without Redis. */
async function webIndexParts(args: string[]): Promise<Record<string, unknown>> {
  const { options: o, dir, partitions, file } = rankBenchOptions(args);
  // Smoke: a looser bound, fewer rounds (the same code paths; worker processes take their seconds to start).
  const tolerance = o.number('--tolerance', 1e-6, 1e-3);
  const down = await redisUnavailable();
  if (down) {
    if (process.env.SHARDFLOW_REQUIRE_BROKERS === '1') throw new Error(`Redis is required (SHARDFLOW_REQUIRE_BROKERS=1) but unavailable: ${down}`);
    const skipped = { skipped: down };
    return { webIndexCost: skipped, webIndexCheckpoints: skipped, webIndexMoves: skipped };
  }
  const wanted = o.string('--wi-stores', 'file,s3', 'file').split(',');
  if (wanted.some((k) => k !== 'file' && k !== 's3')) throw new RangeError(`--wi-stores needs a list of file, s3; got ${wanted.join(',')}`);
  const s3Down = wanted.includes('s3') ? await s3Unavailable() : undefined;
  if (s3Down && process.env.SHARDFLOW_REQUIRE_BROKERS === '1') throw new Error(`the S3 server is required (SHARDFLOW_REQUIRE_BROKERS=1) but unavailable: ${s3Down}`);
  const stores = wanted.filter((k) => k !== 's3' || !s3Down) as Array<'file' | 's3'>;
  const r = await webIndexCheckpointBench({
    graph: await readGraph(file('pages.txt'), file('links.tsv')),
    graphName: dir.split('/').pop()!,
    reference: existsSync(file('pagerank.tsv')) ? new Map(await readScores(file('pagerank.tsv'))) : undefined,
    partitions, tolerance,
    workers: o.number('--wi-workers', 2),
    leaseMs: o.number('--lease-ms', 3000, 2000),
    checkpointIntervalMs: o.has('--checkpoint-interval-ms') ? o.number('--checkpoint-interval-ms', 30_000) : undefined,
    standbys: o.has('--wi-standbys') && o.string('--wi-standbys', '1') === '0' ? 0 : o.number('--wi-standbys', 1),
    stores,
    hangMs: o.number('--wi-hang-ms', 1_800_000, 300_000),
  });
  return { ...r, webIndexCost: { ...r.webIndexCost, ...(s3Down ? { s3: { skipped: s3Down } } : {}), cpus: cpus().length } };
}

/** The checkpoint stores on one store, and the stage partition's planned move (see `run`). */
async function storeParts(args: string[]): Promise<Record<string, unknown>> {
  const o = benchOptions(args);
  const mb = o.number('--mb', 256, 2);
  const more = o.number('--more', 5);
  const work = await mkdtemp(path.join(tmpdir(), 'shardflow-bench-checkpoint-'));
  const key = `bench-${process.pid}-${randomBytes(3).toString('hex')}`;
  const stores: Array<{ name: 'directory' | 's3'; store?: CheckpointStore; skipped?: string }> = [
    { name: 'directory', store: openCheckpointStore(pathToFileURL(path.join(work, 'checkpoints')).href) },
  ];
  const s3Down = await s3Unavailable();
  if (s3Down && process.env.SHARDFLOW_REQUIRE_BROKERS === '1') throw new Error(`the S3 server is required (SHARDFLOW_REQUIRE_BROKERS=1) but unavailable: ${s3Down}`);
  stores.push(s3Down ? { name: 's3', skipped: s3Down } : { name: 's3', store: openCheckpointStore(`s3://${S3_BUCKET}/bench`, { env: s3Env() }) });

  const columnFamilies = { data: {} };
  const db = await Store.open({ path: path.join(work, 'db'), columnFamilies });
  try {
    const entries = Math.round((mb * 2 ** 20) / VALUE_BYTES);
    const t0 = performance.now();
    await write(db, 0, entries);
    const writeSeconds = (performance.now() - t0) / 1000;
    const results: Record<string, Record<string, unknown>> = {};
    for (const s of stores) results[s.name] = s.skipped ? { skipped: s.skipped } : { full: summary(await s.store!.put(key, db, 1)) };
    const extra = Math.round((entries * more) / 100);
    await write(db, entries, extra);
    for (const s of stores) if (s.store) results[s.name]!.incremental = summary(await s.store.put(key, db, 2));
    for (const s of stores) {
      if (!s.store) continue;
      const dir = path.join(work, `restored-${s.name}`);
      const r = await s.store.restore(key, dir);
      const copy = await Store.open({ path: dir, columnFamilies });
      const probe = await copy.get('data', keyOf(entries + extra - 1));
      await copy.close();
      if (!probe) throw new Error(`the store restored from ${s.name} lacks the last key written`);
      results[s.name]!.restore = { seconds: round(r.seconds), bytes: r.bytes, mbPerSecond: round(r.bytes / 2 ** 20 / r.seconds) };
    }
    return {
      smoke: o.smoke,
      params: { mb, morePercent: more, valueBytes: VALUE_BYTES, entries, extraEntries: extra },
      store: { writeSeconds: round(writeSeconds), liveSstBytes: db.stats().columnFamilies.data?.liveSstBytes },
      directory: results.directory,
      s3: results.s3,
      smallPuts: await smallPuts(work, stores, o.number('--small-entries', 40_000, 4_000), o.number('--small-rounds', 30, 5), walBytesOption(o.string('--small-wal-bytes', '0,default'))),
      plannedMove: await plannedMove(work, entries),
    };
  } finally {
    await db.close();
    for (const s of stores) {
      if (!s.store) continue;
      await s.store.remove(key).catch(() => undefined);
      await s.store.close();
    }
    await rm(work, { recursive: true, force: true });
  }
}

/**
 * A planned move of `count/0` (the test kit's click counter with one `count` partition) holding
 * `entries` values of 1 KiB: worker A runs it, the values are written into A's store, A
 * checkpoints it; worker B (its own data dir) joins and A stops (hand-back).
 */
async function plannedMove(work: string, entries: number): Promise<Record<string, unknown>> {
  const down = await redisUnavailable();
  if (down) return { skipped: down };
  const clusterName = `bench-move-${process.pid}`;
  const keyPrefix = `sfc-bench-${process.pid}:`;
  const checkpoints = openCheckpointStore(pathToFileURL(path.join(work, 'move-checkpoints')).href);
  const { topology } = twoStageClicks('bench-move', 1, { maxCount: 32, maxDelayMs: 5 });
  const broker = new MemoryBroker();
  const workers: Worker[] = [];
  const start = async (name: string, events: Array<{ e: WorkerEvent; at: number }>): Promise<Worker> => {
    const w = await startWorker({
      cluster: REDIS_URL, clusterName, keyPrefix, topology, broker, dataDir: path.join(work, `move-${name}`), name, leaseMs: 2000,
      checkpoints, checkpointIntervalMs: 500, onEvent: (e) => events.push({ e, at: performance.now() }), logger: { debug() {}, warn() {}, error() {} },
    });
    workers.push(w);
    return w;
  };
  const waitFor = async (what: string, probe: () => boolean | Promise<boolean>): Promise<void> => {
    for (const deadline = Date.now() + 120_000; !(await probe());) {
      if (Date.now() > deadline) throw new Error(`plannedMove: timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const key = `${clusterName}/count/p0`;
  try {
    const a: Array<{ e: WorkerEvent; at: number }> = [];
    let wa = await start('a', a);
    await waitFor('A running count/0', () => a.some(({ e }) => e.type === 'started' && e.unit === 'count/0'));
    await wa.stop();
    const store = await Store.open({ path: path.join(work, 'move-a', 'stages', 'count', 'p0'), columnFamilies: stageColumnFamilies({ hosts: { mergeOperator: int64Add() } }) });
    for (let i = 0; i < entries; i += BATCH) {
      const batch = store.batch();
      const values = randomBytes(VALUE_BYTES * Math.min(BATCH, entries - i));
      for (let j = 0; j < BATCH && i + j < entries; j++) batch.put('hosts', `filler-${keyOf(i + j)}`, values.subarray(j * VALUE_BYTES, (j + 1) * VALUE_BYTES));
      await store.write(batch);
    }
    await store.close();
    a.length = 0;
    wa = await start('a', a);
    const bytes = entries * VALUE_BYTES;
    await waitFor('A checkpointing the filled store', async () => ((await checkpoints.latest(key))?.bytes ?? 0) >= bytes);
    const b: Array<{ e: WorkerEvent; at: number }> = [];
    await start('b', b);
    await wa.stop();
    await waitFor('B running count/0', () => b.some(({ e }) => e.type === 'started' && e.unit === 'count/0'));
    const released = a.find(({ e }) => e.type === 'released' && e.unit === 'count/0');
    const started = b.find(({ e }) => e.type === 'started' && e.unit === 'count/0')!;
    const restored = b.find(({ e }) => e.type === 'restored' && e.unit === 'count/0')?.e as Extract<WorkerEvent, { type: 'restored' }> | undefined;
    return {
      partitionBytes: (await checkpoints.latest(key))!.bytes,
      releaseToRunningSeconds: released ? round((started.at - released.at) / 1000) : null,
      restoreSeconds: restored ? round(restored.seconds) : null,
      leaseMs: 2000,
    };
  } finally {
    for (const w of workers) await w.stop();
    await broker.close();
    await checkpoints.close();
    await deleteKeys(`${keyPrefix}${clusterName}:`);
  }
}

/** `--small-wal-bytes`: a comma-separated list of byte counts >= 0 and `default`. */
function walBytesOption(list: string): Array<number | 'default'> {
  return list.split(',').map((w) => {
    if (w === 'default') return 'default';
    const n = Number(w);
    if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`--small-wal-bytes needs a list of byte counts >= 0 and 'default'; got ${JSON.stringify(w)}`);
    return n;
  });
}

/** The `smallPuts` part (see `run`): flush per put against the WAL copy, per checkpoint store. */
async function smallPuts(work: string, stores: ReadonlyArray<{ name: string; store?: CheckpointStore; skipped?: string }>, entries: number, rounds: number, walBytesList: ReadonlyArray<number | 'default'>): Promise<Record<string, unknown>> {
  const families = { pages: {}, links: {}, ranks: {} };
  // `--small-wal-bytes 0,default,524288`: the walBytesForFlush values compared (`default`: the put's).
  const modes = walBytesList.map((w) => ({
    mode: w === 'default' ? 'walCopy' : w === 0 ? 'flush' : `walCopy${w}`,
    walBytesForFlush: w === 'default' ? undefined : w,
  }));
  const out: Record<string, unknown> = { entries, rounds, writesPerRound: 900, walBytesForFlushDefault: DEFAULT_CHECKPOINT_WAL_BYTES_FOR_FLUSH };
  for (const s of stores) {
    if (!s.store) {
      out[s.name] = { skipped: s.skipped };
      continue;
    }
    const dbs = await Promise.all(modes.map((m) => Store.open({ path: path.join(work, `small-${s.name}-${m.mode}`), columnFamilies: families })));
    const keys = modes.map((m) => `small-${m.mode}-${process.pid}-${randomBytes(3).toString('hex')}`);
    try {
      // The same writes into both stores: keys in three families, flushed every tenth.
      const fill = async (from: number, count: number, valueBytes: number, flushEvery: number): Promise<void> => {
        for (let i = from; i < from + count; i += 300) {
          const value = randomBytes(valueBytes);
          for (const db of dbs) {
            const batch = db.batch();
            for (let j = i; j < Math.min(i + 300, from + count); j++) batch.put(['pages', 'links', 'ranks'][j % 3]!, keyOf(j * 7919 % (entries * 2)), value);
            await db.write(batch);
          }
          if (flushEvery > 0 && (i + 300) % flushEvery < 300) for (const db of dbs) await db.flush();
        }
      };
      await fill(0, entries, 64, Math.max(300, Math.round(entries / 10)));
      const puts: CheckpointPutReport[][] = modes.map(() => []);
      for (let r = 0; r < rounds; r++) {
        await fill(entries + r * 900, 900, 64, 0);
        for (const [i, m] of modes.entries()) puts[i]!.push(await s.store.put(keys[i]!, dbs[i]!, r + 1, m.walBytesForFlush === undefined ? {} : { walBytesForFlush: m.walBytesForFlush }));
      }
      const med = (xs: number[]): number => spread(xs).median;
      const perMode = modes.map((m, i) => {
        const ps = puts[i]!;
        const last = ps[ps.length - 1]!;
        return [m.mode, {
          checkpointSeconds: med(ps.map((p) => p.checkpointSeconds)),
          uploadSeconds: med(ps.map((p) => p.uploadSeconds)),
          seconds: med(ps.map((p) => p.checkpointSeconds + p.uploadSeconds)),
          maxSeconds: round(Math.max(...ps.map((p) => p.checkpointSeconds + p.uploadSeconds))),
          uploadedFiles: med(ps.map((p) => p.uploadedFiles)),
          uploadedBytes: med(ps.map((p) => p.uploadedBytes)),
          files: last.files,
          walBytesAtLastPut: last.manifest.files.filter((f) => f.name.endsWith('.log')).reduce((a, f) => a + f.bytes, 0),
        }] as const;
      });
      const byMode = Object.fromEntries(perMode);
      const ratio = byMode.walCopy && byMode.flush ? { walCopyOverFlush: round(byMode.walCopy.seconds / byMode.flush.seconds) } : {};
      out[s.name] = { ...byMode, ...ratio };
    } finally {
      for (const db of dbs) await db.close();
      for (const k of keys) await s.store.remove(k).catch(() => undefined);
    }
  }
  return out;
}

const keyOf = (i: number): string => `k${String(i).padStart(15, '0')}`;

/** Writes entries [from, from + count) with incompressible values, then flushes. */
async function write(db: Store, from: number, count: number): Promise<void> {
  for (let i = from; i < from + count; i += BATCH) {
    const batch = db.batch();
    const values = randomBytes(VALUE_BYTES * Math.min(BATCH, from + count - i));
    for (let j = 0; j < BATCH && i + j < from + count; j++) batch.put('data', keyOf(i + j), values.subarray(j * VALUE_BYTES, (j + 1) * VALUE_BYTES));
    await db.write(batch);
  }
  await db.flush();
}

function summary(r: CheckpointPutReport): Record<string, number> {
  return {
    checkpointSeconds: round(r.checkpointSeconds),
    uploadSeconds: round(r.uploadSeconds),
    seconds: round(r.checkpointSeconds + r.uploadSeconds),
    files: r.files,
    bytes: r.bytes,
    uploadedFiles: r.uploadedFiles,
    uploadedBytes: r.uploadedBytes,
  };
}

const round = (x: number): number => Math.round(x * 1000) / 1000;
