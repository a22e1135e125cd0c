import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  AskTimeoutError, DataDirError, InvalidArgumentError, lastWriteWins, MemoryBroker, connectClusterClient, RedisStreamsBroker, Topology, defineNamespace, int64Add, msgpackCodec, startPartitionHost, startWorker, topologyApplication, type Logger, type WorkerEvent,
} from '../src/index.js';
import { tempDir } from './kit/datasets.js';
import { Redis } from 'ioredis';
import { ClusterKeys } from '../src/cluster/keys.js';
import { checkClusterCheckpoints } from '../src/cluster/membership.js';
import { openCheckpointStore } from '../src/storage/index.js';
import { REDIS_URL, clusterClickTopology, deleteKeys, skipWithoutRedis } from './kit/cluster.js';
import { S3_BUCKET, s3Env, skipWithoutS3 } from './kit/s3.js';

/**
 * What a worker refuses, with the reason: a topology other than the cluster's or another
 * checkpoint store than its workers' (at start), and
 * a partition whose store was written with another shape (that unit only: the worker keeps
 * the reason in its report, `clusterStatus` shows it, the other units run).
 */
const quiet: Logger = { debug() {}, warn() {}, error() {} };

test('a worker refuses another topology, and a partition store of another shape with its reason', async (t) => {
  if (await skipWithoutRedis(t)) return;
  const brokerPrefix = `sftest-${process.pid}-refusals:`;
  const keyPrefix = `sfc-test-${process.pid}-refusals:`;
  const broker = await RedisStreamsBroker.connect({ url: REDIS_URL, prefix: brokerPrefix, heartbeatMs: 100, deadAfterMs: 1500, blockMs: 100 });
  const { dir, cleanup } = tempDir('sf-cluster-refusals-');
  const { topology } = clusterClickTopology();
  // count/p0 written by a topology whose clicks have 4 partitions, not 6.
  const clicks4 = defineNamespace('clicks', { codec: msgpackCodec('Click', (v: unknown): v is { host: string } => typeof v === 'object'), partitions: 4, key: (c: { host: string }) => c.host });
  const other = Topology.create('cluster-clicks').stage('count', { input: clicks4, columnFamilies: { hosts: { mergeOperator: int64Add() } } });
  const writer = await startPartitionHost(other, { broker, dataDir: dir, logger: quiet });
  await writer.startPartition('count', 0);
  await writer.stop();

  const events: WorkerEvent[] = [];
  const options = { cluster: REDIS_URL, clusterName: 'refusals', keyPrefix, broker, dataDir: dir, leaseMs: 1000, logger: quiet };
  const worker = await startWorker({ ...options, topology, name: 'w1', onEvent: (e) => events.push(e) });
  try {
    await assert.rejects(startWorker({ ...options, topology: other, name: 'w2' }), (err: unknown) => err instanceof InvalidArgumentError && /runs other stages than this worker .* this worker's topology has/.test(err.message));
    // The same stages and partitions, but totals merges with another operator (found by a new
    // user: such a worker joined, and took partitions that it then refused one by one).
    const { clicks, deltas } = clusterClickTopology();
    const lww = Topology.create('cluster-clicks')
      .stage('count', { input: clicks, outputs: { deltas }, columnFamilies: { hosts: { mergeOperator: int64Add() } }, onMessage: () => {} })
      .stage('totals', { input: deltas, columnFamilies: { hosts: { mergeOperator: lastWriteWins() } }, onMessage: () => {} });
    await assert.rejects(startWorker({ ...options, topology: lww, name: 'w2' }), (err: unknown) => err instanceof InvalidArgumentError &&
      /runs other stages than this worker \(stage totals: config "store hosts\(shardflow\.int64_add\.v1\); outputs -", this worker "store hosts\(shardflow\.lww\.v1\); outputs -"\)/.test(err.message));
    const exactlyOne = (err: unknown) => err instanceof InvalidArgumentError && /exactly one of topology .* and application/.test(err.message);
    await assert.rejects(startWorker({ ...options, name: 'w2' } as unknown as Parameters<typeof startWorker>[0]), exactlyOne, 'neither topology nor application');
    await assert.rejects(startWorker({ ...options, topology, application: topologyApplication(topology), name: 'w2' } as unknown as Parameters<typeof startWorker>[0]), exactlyOne, 'both');
    // Standbys keep checkpoints warm: none without checkpoints.
    await assert.rejects(startWorker({ ...options, topology, name: 'w2', standbyReplicas: 1 }), (err: unknown) => err instanceof InvalidArgumentError && /standbyReplicas 1 needs checkpoints/.test(err.message));
    await assert.rejects(startWorker({ ...options, topology, name: 'w2', standbyReplicas: 0.5 }), (err: unknown) => err instanceof InvalidArgumentError && /standbyReplicas must be an integer >= 0, got 0.5/.test(err.message));
    // A checkpoint store the cluster's workers do not use (found by an operator: the worker
    // took partitions from the others and refused them, "no checkpoint of it").
    await assert.rejects(
      startWorker({ ...options, topology, name: 'w2', checkpoints: `file://${dir}/checkpoints` }),
      (err: unknown) => err instanceof InvalidArgumentError && /cluster refusals's workers use checkpoint store none \(worker w1\.[0-9a-f]+\), this worker file:\/\/.*\/checkpoints: give every worker of a cluster the same --checkpoints/.test(err.message),
    );
    // A broker in another scope (found by a new user: a worker opened with a prefix of its own
    // ran its partitions on streams no client asked on, and asks timed out).
    const elsewhere = await RedisStreamsBroker.connect({ url: REDIS_URL, prefix: `${brokerPrefix}elsewhere:`, heartbeatMs: 100, deadAfterMs: 1500, blockMs: 100 });
    try {
      await assert.rejects(
        startWorker({ ...options, broker: elsewhere, topology, name: 'w2' }),
        (err: unknown) => err instanceof InvalidArgumentError && /cluster refusals's workers use broker scope ".*refusals:" \(worker w1\.[0-9a-f]+\), this worker ".*refusals:elsewhere:": their topics never meet; .*clusterBrokerIdentity/.test(err.message),
      );
    } finally {
      await elsewhere.close();
    }

    const deadline = Date.now() + 30_000;
    let status = await worker.clusterStatus();
    while (!status.partitions.every((p) => (p.unit === 'count/0' ? p.state === 'failed' : p.state === 'running'))) {
      assert.ok(Date.now() < deadline, `timed out: ${JSON.stringify(status.partitions.map((p) => [p.unit, p.state]))}`);
      await new Promise((r) => setTimeout(r, 100));
      status = await worker.clusterStatus();
    }
    const refused = status.partitions.find((p) => p.unit === 'count/0')!;
    assert.equal(refused.owner, undefined, 'its lease was released');
    assert.match(refused.reason ?? '', /was written as stage count on clicks, partition 0 of 4 .* not as .* partition 0 of 6/);
    const failed = events.find((e) => e.type === 'failed');
    assert.ok(failed && failed.type === 'failed' && failed.unit === 'count/0' && /partition 0 of 4/.test(failed.reason));
    assert.equal(worker.partitions().length, 7, 'the other units run');
    // A client's ask of the refused unit times out naming the refusal (found by a new user:
    // it said "the unit unowned, or its owner busy" while the status knew why).
    const client = await connectClusterClient({ cluster: REDIS_URL, clusterName: 'refusals', keyPrefix, broker });
    try {
      await assert.rejects(client.ask('count', 0, 'x', { timeoutMs: 1000 }), (err: unknown) => err instanceof AskTimeoutError && /no answer from count\/0 within 1000 ms \(failed.*: .*partition 0 of 4/.test((err as Error).message));
    } finally {
      await client.close();
    }
  } finally {
    await worker.stop();
    await broker.close();
    await deleteKeys(brokerPrefix, keyPrefix);
    cleanup();
  }
});

test('a topology partition started by an earlier owner, with no store in this data dir and no checkpoints, is refused with the reason instead of starting empty', async () => {
  // Found by a new user: workers with their own data dirs and no --checkpoints; the partitions
  // the leader moved to a joining worker started from empty stores, and the counts came out
  // short with no error (only the web index refused this).
  const { dir, cleanup } = tempDir('sf-cluster-started-before-');
  const broker = new MemoryBroker();
  const { topology } = clusterClickTopology();
  const host = await startPartitionHost(topology, { broker, dataDir: dir, logger: quiet });
  try {
    const moved = { epoch: 2, check() {}, startedBefore: true };
    await assert.rejects(host.startPartition('count', 1, moved), (err: unknown) => err instanceof DataDirError && /partition 1 of stage count was started by an earlier owner \(this ownership is epoch 2\) but its store .*count\/p1 is not in this worker's data dir: its state is in another machine's data dir \(give the workers a checkpoint store, --checkpoints/.test((err as Error).message));
    assert.deepEqual(host.partitions(), [], 'nothing started');
    // A first start, or a store that is here, starts as before.
    await host.startPartition('count', 1, { epoch: 1, check() {}, startedBefore: false });
    await host.stopPartition('count', 1);
    await host.startPartition('count', 1, moved);
    assert.deepEqual(host.partitions().map((p) => `${p.stage}/${p.partition}`), ['count/1']);
  } finally {
    await host.stop();
    await broker.close();
    cleanup();
  }
});

test('with checkpoints, a first start puts one before consuming, and a partition started before with neither a store nor a checkpoint is refused', async () => {
  // Found by a new user: a stage partition whose checkpoints were removed (and its worker's
  // data dir wiped) started empty, reported running, and answered 0 accounts.
  const { dir, cleanup } = tempDir('sf-cluster-started-before-cp-');
  const broker = new MemoryBroker();
  const { topology } = clusterClickTopology();
  const store = openCheckpointStore(`file://${dir}/checkpoints`);
  const checkpoints = { store, keyPrefix: 'refusals', intervalMs: 60_000 };
  const host = await startPartitionHost(topology, { broker, dataDir: `${dir}/a`, logger: quiet, checkpoints });
  const other = await startPartitionHost(topology, { broker, dataDir: `${dir}/b`, logger: quiet, checkpoints });
  try {
    await host.startPartition('count', 2, { epoch: 1, check() {}, startedBefore: false });
    assert.equal((await store.list('refusals/count/p2')).length, 1, 'the first start put the empty store');
    await host.stopPartition('count', 2);
    // Another worker restores it from that checkpoint.
    await other.startPartition('count', 2, { epoch: 2, check() {}, startedBefore: true });
    await other.stopPartition('count', 2);
    await store.remove('refusals/count/p2');
    const moved = { epoch: 3, check() {}, startedBefore: true };
    const third = await startPartitionHost(topology, { broker, dataDir: `${dir}/c`, logger: quiet, checkpoints });
    try {
      await assert.rejects(third.startPartition('count', 2, moved), (err: unknown) => err instanceof DataDirError && /partition 2 of stage count was started by an earlier owner \(this ownership is epoch 3\) but its store .*count\/p2 is not in this worker's data dir and the checkpoint store has no checkpoint of it \(refusals\/count\/p2\): the checkpoints were removed/.test((err as Error).message));
      assert.deepEqual(third.partitions(), []);
    } finally {
      await third.stop();
    }
  } finally {
    await host.stop();
    await other.stop();
    await store.close();
    await broker.close();
    cleanup();
  }
});

test('a cluster keeps the checkpoint store its partitions ran with: a worker with another store, or none, is refused even when no worker is live', async (t) => {
  if (await skipWithoutRedis(t)) return;
  const brokerPrefix = `sftest-${process.pid}-store-record:`;
  const keyPrefix = `sfc-test-${process.pid}-store-record:`;
  const broker = await RedisStreamsBroker.connect({ url: REDIS_URL, prefix: brokerPrefix, heartbeatMs: 100, deadAfterMs: 1500, blockMs: 100 });
  const { dir, cleanup } = tempDir('sf-cluster-store-record-');
  const { topology } = clusterClickTopology();
  const options = { cluster: REDIS_URL, clusterName: 'store-record', keyPrefix, broker, leaseMs: 1000, logger: quiet, topology };
  const redis = new Redis(REDIS_URL);
  try {
    // Found by a new user: a click counter stopped, then started on another store with an
    // empty data dir, counted 0 clicks and said nothing.
    const a = await startWorker({ ...options, name: 'a', dataDir: `${dir}/a`, checkpoints: `file://${dir}/A` });
    const deadline = Date.now() + 30_000;
    while (!(await a.clusterStatus()).partitions.every((p) => p.state === 'running')) {
      assert.ok(Date.now() < deadline, 'timed out waiting for the partitions');
      await new Promise((r) => setTimeout(r, 100));
    }
    await a.stop();
    for (const [checkpoints, shown] of [[`file://${dir}/B`, `file://${dir}/B`], [undefined, 'none']] as const) {
      await assert.rejects(
        startWorker({ ...options, name: 'b', dataDir: `${dir}/b`, ...(checkpoints ? { checkpoints } : {}) }),
        (err: unknown) => err instanceof InvalidArgumentError && err.message.includes(`cluster store-record ran its partitions (8 started) with checkpoint store file://${dir}/A, this worker has ${shown}: a partition it took would start without the state stored there. Give --checkpoints file://${dir}/A`),
        shown,
      );
    }
    const again = await startWorker({ ...options, name: 'b', dataDir: `${dir}/b`, checkpoints: `file://${dir}/A` });
    await again.stop();

    // Before any partition started, a worker with another store records its own.
    const keys = new ClusterKeys('store-record-fresh', keyPrefix);
    await checkClusterCheckpoints(redis, keys, 'file:///x');
    await checkClusterCheckpoints(redis, keys, 'file:///y');
    assert.equal(await redis.get(keys.checkpoints), 'file:///y');
    // S3 stores of one URL on two servers are two stores.
    const at = (endpoint: string) => openCheckpointStore('s3://bucket/p', { env: { AWS_ENDPOINT_URL: endpoint } }).location;
    assert.equal(at('http://127.0.0.1:9000'), 's3://bucket/p at http://127.0.0.1:9000');
    assert.notEqual(at('http://127.0.0.1:9000'), at('http://10.0.0.2:9000'));
    assert.equal(openCheckpointStore(`file://${dir}/A`).location, `file://${dir}/A`);
  } finally {
    redis.disconnect();
    await broker.close();
    await deleteKeys(brokerPrefix, keyPrefix);
    cleanup();
  }
});

test('a worker whose checkpoint store refuses it (wrong secret key, no such bucket) is refused at start; one that does not answer joins and its partitions wait', async (t) => {
  // Found by a new user: a worker with a wrong secret key joined, took 5 partitions and
  // refused each with the 403, while the others' workers could have run them.
  if (await skipWithoutRedis(t)) return;
  if (await skipWithoutS3(t)) return;
  const keyPrefix = `sfc-test-${process.pid}-access:`;
  const broker = new MemoryBroker();
  const { dir, cleanup } = tempDir('sf-cluster-access-');
  const { topology } = clusterClickTopology();
  const options = { cluster: REDIS_URL, clusterName: 'access', keyPrefix, broker, dataDir: dir, leaseMs: 1000, logger: quiet, topology };
  try {
    const wrongKey = openCheckpointStore(`s3://${S3_BUCKET}/access`, { env: { ...s3Env(), AWS_SECRET_ACCESS_KEY: 'not-the-secret' } });
    await assert.rejects(startWorker({ ...options, name: 'w1', checkpoints: wrongKey }),
      (err: unknown) => err instanceof InvalidArgumentError && /the checkpoint store s3:\/\/.*\/access at http.* refuses this worker: S3 GET .*HTTP 403, .*Give it the credentials and bucket/.test(err.message));
    const noBucket = openCheckpointStore('s3://no-such-bucket-here/access', { env: s3Env() });
    await assert.rejects(startWorker({ ...options, name: 'w1', checkpoints: noBucket }),
      (err: unknown) => err instanceof InvalidArgumentError && /refuses this worker: S3 GET .*HTTP 404, NoSuchBucket/.test(err.message));
    // Nor its stages (found by a new user: a worker refused for its key recorded its topology,
    // and every right worker was refused after it).
    assert.deepEqual(await redisKeys(keyPrefix, ['members', 'checkpoints', 'topology']), [], 'a refused worker recorded neither itself, its checkpoint store nor its stages');
    // While the cluster is being retired (`cluster retire` holds this marker), a worker is refused at its join.
    const r = new Redis(REDIS_URL);
    try {
      await r.set(`${keyPrefix}access:retiring`, '1', 'PX', 10_000);
      await assert.rejects(startWorker({ ...options, name: 'w1' }), (err: unknown) => err instanceof InvalidArgumentError && /cluster access is being retired/.test(err.message));
      await r.del(`${keyPrefix}access:retiring`);
    } finally {
      r.disconnect();
    }
    // No answer (nothing listens there): joins, and its partitions wait for the store.
    const silent = openCheckpointStore(`s3://${S3_BUCKET}/access`, { env: { ...s3Env(), AWS_ENDPOINT_URL: 'http://127.0.0.1:9' }, s3: { maxAttempts: 1, timeoutMs: 500 } });
    const events: WorkerEvent[] = [];
    const warnings: string[] = [];
    const w = await startWorker({ ...options, name: 'w1', checkpoints: silent, logger: { ...quiet, warn: (_o: unknown, m?: string) => warnings.push(String(m)) }, onEvent: (e) => events.push(e) });
    try {
      assert.ok(warnings.some((m) => /checkpoint store .* does not answer .*joining anyway/.test(m)), warnings.join('\n'));
      const deadline = Date.now() + 20_000;
      while (!events.some((e) => e.type === 'waiting')) {
        assert.ok(Date.now() < deadline, JSON.stringify(events));
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.ok(!events.some((e) => e.type === 'failed'), 'nothing refused for a store that does not answer');
    } finally {
      await w.stop();
    }
  } finally {
    await broker.close();
    await deleteKeys(keyPrefix);
    cleanup();
  }
});

/** Which of `names` exist as keys of cluster `access` under `prefix`. */
async function redisKeys(prefix: string, names: string[]): Promise<string[]> {
  const r = new Redis(REDIS_URL);
  try {
    const found: string[] = [];
    for (const n of names) if ((await r.exists(`${prefix}access:${n}`)) === 1) found.push(n);
    return found;
  } finally {
    r.disconnect();
  }
}

test('with checkpoints, one worker per name on a data dir: a second of the same name is refused, default names of one process differ', async (t) => {
  // Found by a new user: two workers named p2 on one data dir shared a standby cache and
  // fetched the same checkpoint 45 times in 25 s, removing each other's files.
  if (await skipWithoutRedis(t)) return;
  const keyPrefix = `sfc-test-${process.pid}-names:`;
  const broker = new MemoryBroker();
  const { dir, cleanup } = tempDir('sf-cluster-names-');
  const { topology } = clusterClickTopology();
  const options = { cluster: REDIS_URL, clusterName: 'names', keyPrefix, broker, dataDir: dir, leaseMs: 1000, logger: quiet, topology, checkpoints: `file://${dir}/checkpoints` };
  const workers: Awaited<ReturnType<typeof startWorker>>[] = [];
  try {
    workers.push(await startWorker({ ...options, name: 'p2' }));
    await assert.rejects(startWorker({ ...options, name: 'p2' }), (err: unknown) => err instanceof DataDirError && /another worker named p2 runs on data dir .* \(pid \d+; lock file .*standby-cache\/p2\.lock\): give this one another name/.test(err.message));
    workers.push(await startWorker({ ...options }), await startWorker({ ...options }));
    const [a, b] = [workers[1]!.name, workers[2]!.name];
    assert.notEqual(a, b);
    assert.equal(b, `${a}-2`, 'a second default-named worker of this process gets -2');
    await workers[0]!.stop();
    workers.push(await startWorker({ ...options, name: 'p2' })); // taken again once the first stopped
  } finally {
    for (const w of workers) await w.stop();
    await broker.close();
    await deleteKeys(keyPrefix);
    cleanup();
  }
});
