import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { openCheckpointStore, Store, type CheckpointPutReport, type CheckpointStore } from '../src/storage/index.js';
import { s3Env, S3_BUCKET, s3Unavailable } from '../test/kit/s3.js';
import { benchOptions } from './lib/options.js';

/** Top-level fields of the result line besides bench/run.mjs's (checked by test/bench.smoke.test.ts). */
export const resultFields = ['smoke', 'params', 'store', 'directory', 's3'] as const;

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
 * S3 is measured when reachable; otherwise its part says `skipped` with the reason, and with
 * `SHARDFLOW_REQUIRE_BROKERS=1` (CI) the run fails instead.
 *
 * Args: `--mb M` (256), `--more P` (5). `--smoke`: 2 MiB.
 */
export async function run(args: string[]): Promise<Record<string, unknown>> {
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
