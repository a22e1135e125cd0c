import assert from 'node:assert/strict';
import { readdir, rm, writeFile } from 'node:fs/promises';
import { Redis } from 'ioredis';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { test } from 'node:test';
import { MemoryBroker, openExternalProducer, stageCheckpointKey, startWorker, type Worker, type WorkerEvent } from '../src/index.js';
import { openCheckpointStore, type CheckpointStore } from '../src/storage/index.js';
import { S3_BUCKET, s3Env, skipWithoutS3 } from './kit/s3.js';
import { REDIS_URL, clusterClickTopology, deleteKeys, skipWithoutRedis } from './kit/cluster.js';
import { tempDir } from './kit/datasets.js';
import { manifestName } from '../src/checkpoint/manifest.js';
import { until } from './kit/clusterRun.js';
import { runCli } from './kit/cliRun.js';

/**
 * One worker at a time in this process (Redis coordinates, the in-memory broker carries the
 * clicks), each start with a data dir of its own or an old one, over one directory checkpoint
 * store (and the S3 server's): which store a partition opens (restored, or its own), and a
 * damaged checkpoint refused for its unit alone.
 */
const LEASE_MS = 1000;

async function withRun(t: import('node:test').TestContext, where: 'directory' | 's3', body: (run: {
  start(dataDir: string, events: WorkerEvent[]): Promise<Worker>;
  send(n: number): Promise<void>;
  counts(w: Worker, stage: 'count' | 'totals'): Promise<Map<string, number>>;
  truth: Map<string, number>;
  dir: string;
  checkpoints: string;
  clusterName: string;
}) => Promise<void>): Promise<void> {
  if (await skipWithoutRedis(t)) return;
  if (where === 's3' && (await skipWithoutS3(t))) return;
  const dir = tempDir('sf-ckpt-restore-');
  const clusterName = `ckpt-${process.pid}-${Math.floor(Math.random() * 1e9).toString(36)}`;
  const keyPrefix = `sfc-test-${process.pid}:`;
  const checkpoints = join(dir.dir, 'checkpoints');
  const store: CheckpointStore = where === 's3'
    ? openCheckpointStore(`s3://${S3_BUCKET}/test-restore`, { env: s3Env() })
    : openCheckpointStore(pathToFileURL(checkpoints).href);
  const broker = new MemoryBroker();
  const { topology, clicks } = clusterClickTopology();
  const producer = await openExternalProducer({ broker, dataDir: dir.dir, namespace: clicks, name: 'clicks-src' });
  const truth = new Map<string, number>();
  let sent = 0;
  const workers: Worker[] = [];
  try {
    await body({
      truth, dir: dir.dir, checkpoints, clusterName,
      async start(dataDir, events) {
        const w = await startWorker({
          cluster: REDIS_URL, clusterName, keyPrefix, topology, broker, dataDir, leaseMs: LEASE_MS,
          checkpoints: store, checkpointIntervalMs: 100, onEvent: (e) => events.push(e),
          logger: { debug() {}, warn() {}, error() {} },
        });
        workers.push(w);
        return w;
      },
      async send(n) {
        for (let i = 0; i < n; i++, sent++) {
          const host = `site-${sent % 17}.example`;
          await producer.send({ host, n: sent });
          truth.set(host, (truth.get(host) ?? 0) + 1);
        }
      },
      async counts(w, stage) {
        const sums = new Map<string, number>();
        for (let p = 0; p < (stage === 'count' ? 6 : 2); p++) {
          for (const [h, c] of (await w.host.ask(stage, p, 'hosts')) as Array<[string, number]>) sums.set(h, (sums.get(h) ?? 0) + c);
        }
        return new Map([...sums].sort());
      },
    });
  } finally {
    for (const w of workers) await w.stop();
    await producer.close();
    await broker.close();
    await deleteKeys(`${keyPrefix}${clusterName}:`);
    for (const [stage, n] of [['count', 6], ['totals', 2]] as const) for (let p = 0; p < n; p++) await store.remove(stageCheckpointKey(clusterName, stage, p));
    await store.close();
    dir.cleanup();
  }
}

const sorted = (m: Map<string, number>) => new Map([...m].sort());
const types = (events: WorkerEvent[], type: WorkerEvent['type']) => events.filter((e) => e.type === type) as Array<WorkerEvent & { unit: string; reason?: string }>;

for (const where of ['directory', 's3'] as const) {
  test(`${where} store: a partition opens its own store when it is as new as the latest checkpoint, and restores the checkpoint when its store is missing or older`, async (t) => {
    await withRun(t, where, restoreDecisions);
  });
}

async function restoreDecisions(run: Parameters<Parameters<typeof withRun>[2]>[0]): Promise<void> {
  {
    const [dirA, dirB] = [join(run.dir, 'a'), join(run.dir, 'b')];
    const allRunning = (events: WorkerEvent[]) => until('all 8 units running', async () => types(events, 'started').length >= 8);

    const eventsA: WorkerEvent[] = [];
    let a = await run.start(dirA, eventsA);
    await allRunning(eventsA);
    await run.send(300);
    await until('both stages exact on A', async () => String([...(await run.counts(a, 'totals'))]) === String([...sorted(run.truth)]));
    await a.stop();

    const eventsB: WorkerEvent[] = [];
    const b = await run.start(dirB, eventsB);
    await allRunning(eventsB);
    assert.equal(types(eventsB, 'restored').length, 8, 'B has no store: every unit restored');
    assert.ok(types(eventsB, 'restored').every((e) => e.reason === 'missing'));
    assert.deepEqual(await run.counts(b, 'count'), sorted(run.truth), 'restored at once with every count');
    await run.send(200);
    await until('both stages exact on B', async () => String([...(await run.counts(b, 'totals'))]) === String([...sorted(run.truth)]));
    await b.stop();

    const eventsA2: WorkerEvent[] = [];
    a = await run.start(dirA, eventsA2);
    await allRunning(eventsA2);
    const restored = types(eventsA2, 'restored');
    assert.ok(restored.length >= 1, 'A\'s stores are older than B\'s checkpoints');
    for (const r of restored) assert.match(r.reason!, /owner epoch \d+ .* is older than checkpoint/);
    assert.deepEqual(await run.counts(a, 'count'), sorted(run.truth), 'A counts what B counted');
    assert.deepEqual(await run.counts(a, 'totals'), sorted(run.truth));
    await a.stop();

    const eventsA3: WorkerEvent[] = [];
    a = await run.start(dirA, eventsA3);
    await allRunning(eventsA3);
    assert.equal(types(eventsA3, 'restored').length, 0, 'A\'s stores are now as new as the latest checkpoints: opened as they are');
    assert.deepEqual(await run.counts(a, 'totals'), sorted(run.truth));
  }
}

test('a damaged checkpoint refuses its unit with the reason; no store is opened for it', async (t) => {
  await withRun(t, 'directory', async (run) => {
    await countThenStop(run, 'a', 200);

    const files = join(run.checkpoints, run.clusterName, 'count', 'p0', 'files');
    for (const f of await readdir(files)) await writeFile(join(files, f), 'bit rot');
    const eventsB: WorkerEvent[] = [];
    const dirB = join(run.dir, 'b');
    const b = await run.start(dirB, eventsB);
    const failed = await until('count/0 refused', async () => types(eventsB, 'failed').find((e) => e.unit === 'count/0'));
    assert.match(failed.reason!, /checkpoint .*count\/p0/i);
    await until('the other 7 units running', async () => types(eventsB, 'started').length >= 7);
    assert.ok(!types(eventsB, 'started').some((e) => e.unit === 'count/0'));
    assert.equal(existsSync(join(dirB, 'stages', 'count', 'p0')), false, 'no store opened (nor created) for the refused unit');
    const refused = await until('the status to show count/0 failed (the next heartbeat publishes the report)', async () => (await b.clusterStatus()).partitions.find((p) => p.unit === 'count/0' && p.state === 'failed'));
    assert.match(refused.reason ?? '', /checkpoint/i);
  });
});

test('a removed newest manifest refuses its unit (the cluster recorded that checkpoint durable), on an older local store and on a fresh data dir', async (t) => {
  // Found by a new user on the S3 store: with a partition's newest manifest object deleted (by
  // hand, or an S3 lifecycle rule) the next owner restored the one before, and what had been
  // acked since was lost (26 of 50,000 transfers) with no error.
  await withRun(t, 'directory', async (run) => {
    const key = stageCheckpointKey(run.clusterName, 'count', 0);
    const recorded = async (k = key) => {
      const r = new Redis(REDIS_URL);
      try {
        return await r.hget(`sfc-test-${process.pid}:${run.clusterName}:checkpointed`, k);
      } finally {
        r.disconnect();
      }
    };
    const store = openCheckpointStore(pathToFileURL(run.checkpoints).href);
    try {
      await countThenStop(run, 'a', 200);
      assert.equal(await recorded(), String((await store.latest(key))!.sequence), 'each durable put is recorded: the hand-back\'s last');
      await countThenStop(run, 'b', 100);
      const newest = (await store.latest(key))!.sequence;
      assert.equal(await recorded(), String(newest));
      const removed = await removeManifest(run.checkpoints, key, newest);
      // Units whose newest manifest was in a removed group object with count/0's lost theirs too
      // unless a later one of theirs is elsewhere.
      const gone: string[] = [];
      for (const unit of removed) {
        const k = stageCheckpointKey(run.clusterName, 'count', Number(unit.split('/')[1]));
        if (((await store.latest(k))?.sequence ?? -1) < Number(await recorded(k))) gone.push(unit);
      }
      assert.ok(gone.includes('count/0'));
      const before = (await store.latest(key))?.sequence;
      assert.ok(before === undefined || before < newest, 'the newest manifest is gone');

      for (const [where, dataDir] of [['an older local store', join(run.dir, 'a')], ['a fresh data dir', join(run.dir, 'c')]] as const) {
        const events: WorkerEvent[] = [];
        const w = await run.start(dataDir, events);
        const failed = await until(`count/0 refused on ${where}`, async () => types(events, 'failed').find((e) => e.unit === 'count/0'));
        assert.match(failed.reason!, new RegExp(`checkpoint ${newest} of ${key.replace(/[.]/g, '\\.')} was recorded durable .* but (the local store .* holds checkpoint \\d+|the checkpoint store's newest is ${before ?? 'none'}).*manifest was removed`));
        await until(`the units whose newest manifest stayed running on ${where}`, async () => types(events, 'started').length >= 8 - gone.length);
        await until(`the units whose newest manifest went with count/0's refused on ${where}`, async () => types(events, 'failed').length >= gone.length);
        assert.deepEqual(types(events, 'failed').map((e) => e.unit).sort(), gone, `the refused units on ${where}`);
        assert.ok(!types(events, 'started').some((e) => gone.includes(e.unit)), `no unit without its newest manifest started on ${where}`);
        if (where === 'a fresh data dir') {
          // Retiring is refused while a worker is live.
          const refused = await runCli(['cluster', 'retire', '--cluster', REDIS_URL, '--name', run.clusterName, '--key-prefix', `sfc-test-${process.pid}:`]);
          assert.equal(refused.code, 2, refused.stderr);
          assert.match(refused.stderr, /still has live workers .*: stop them first/);
        }
        await w.stop();
      }
      // `cluster retire --checkpoints`: the cluster begins afresh under its name (found by a new
      // user: retireCluster removed the Redis keys only, and workers started again restored the
      // old checkpoints; there was no command for it).
      // Another store than the cluster's is refused before anything is removed (found by a new
      // user: a mistyped URL removed nothing, exit 0, and the next workers restored the old state).
      const retireArgs = ['cluster', 'retire', '--cluster', REDIS_URL, '--name', run.clusterName, '--key-prefix', `sfc-test-${process.pid}:`];
      const wrong = await runCli([...retireArgs, '--checkpoints', pathToFileURL(`${run.checkpoints}-elsewhere`).href]);
      assert.equal(wrong.code, 2, wrong.stderr);
      assert.match(wrong.stderr, /ran with checkpoint store file:\/\/.*\/checkpoints, not file:\/\/.*\/checkpoints-elsewhere: give that one/);
      assert.notEqual(await recorded(), null, 'nothing removed');
      const retired = await runCli([...retireArgs, '--checkpoints', pathToFileURL(run.checkpoints).href, '--broker', REDIS_URL]);
      assert.equal(retired.code, 0, retired.stderr);
      assert.match(retired.stdout, new RegExp(`retired cluster ${run.clusterName}: \\d+ Redis keys deleted, \\d+ checkpoints removed from file://.*, its broker scope deleted \\(\\d+ topics\\)`));
      for (const [stage, n] of [['count', 6], ['totals', 2]] as const) {
        for (let p = 0; p < n; p++) assert.deepEqual(await store.list(stageCheckpointKey(run.clusterName, stage, p)), [], `${stage}/${p}: no checkpoint left`);
      }
      assert.equal(await recorded(), null, 'nor its record in Redis');
      const events: WorkerEvent[] = [];
      const fresh = await run.start(join(run.dir, 'd'), events);
      await until('all 8 units running afresh', async () => types(events, 'started').length >= 8);
      assert.equal(types(events, 'restored').length + types(events, 'failed').length, 0, 'nothing restored, nothing refused');
      assert.deepEqual(await run.counts(fresh, 'count'), new Map(), 'the counts begin at 0');
      await fresh.stop();
    } finally {
      await store.close();
    }
  });
});

/** Starts a worker on data dir `<run.dir>/<name>`, sends `n` clicks, waits until both stages count them all, and stops it (a hand-back: last checkpoints). */
async function countThenStop(run: Parameters<Parameters<typeof withRun>[2]>[0], name: string, n: number): Promise<void> {
  const events: WorkerEvent[] = [];
  const w = await run.start(join(run.dir, name), events);
  await until(`all 8 units running on ${name}`, async () => types(events, 'started').length >= 8);
  await run.send(n);
  await until(`both stages exact on ${name}`, async () => String([...(await run.counts(w, 'totals'))]) === String([...sorted(run.truth)]));
  await w.stop();
}

/**
 * Removes checkpoint `key`@`sequence`'s manifest from a directory store: its own object, or the
 * group object it was stored in (a put with no new files: docs/checkpoints.md, "Group commits"),
 * which holds other keys' manifests too.
 * @returns the units (`count/<p>`) whose manifest was removed, sorted
 */
async function removeManifest(checkpoints: string, key: string, sequence: number): Promise<string[]> {
  const own = join(checkpoints, manifestName(key, sequence));
  if (existsSync(own)) {
    await rm(own);
    return [`count/${key.split('/').at(-1)!.slice(1)}`];
  }
  const groups = join(checkpoints, key.split('/').slice(0, -1).join('/'), '_groups');
  const entry = `${key.split('/').at(-1)}-${sequence.toString(36)}-`;
  for (const name of await readdir(groups)) {
    const entries = name.split('!');
    if (!entries.some((e) => e.startsWith(entry))) continue;
    await rm(join(groups, name));
    return entries.map((e) => `count/${e.split('-')[0]!.slice(1)}`).sort();
  }
  throw new Error(`no manifest of ${key}@${sequence} in ${checkpoints}`);
}
