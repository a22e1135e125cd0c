import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  FencedError, RedisStreamsBroker, epochSequence, openExternalProducer, producerId, sequence, startPartitionHost, type Logger,
} from '../src/index.js';
import { ClusterKeys } from '../src/cluster/keys.js';
import { acquireLease, Lease, raiseEpoch, releaseLease, renewLeases, type LeaseTiming } from '../src/cluster/lease.js';
import { connectCoordination } from '../src/cluster/redisConnection.js';
import { Store } from '../src/storage/index.js';
import { readOwnerEpoch } from '../src/runtime/stream/ownerEpoch.js';
import { stageColumnFamilies } from '../src/runtime/stream/reserved.js';
import { topic } from '../src/runtime/topics.js';
import { partitionId } from '../src/runtime/ids.js';
import { tempDir } from './kit/datasets.js';
import { REDIS_URL, clusterClickTopology, deleteKeys, skipWithoutRedis } from './kit/cluster.js';

/**
 * Leases and fencing against the real Redis and real stores: a lease's epoch grows at every
 * change of owner and an old holder can neither renew nor release the new one's; a partition
 * whose lease ran out commits nothing more and stops; its store then refuses the older epoch;
 * a message its old owner publishes late is dead-lettered, not counted, and does not make the
 * receiver skip the new owner's messages.
 */
const quiet: Logger = { debug() {}, warn() {}, error() {} };

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('partition leases: the epoch grows at every change of owner; an old holder renews and releases nothing', async (t) => {
  if (await skipWithoutRedis(t)) return;
  const prefix = `sfc-test-${process.pid}-lease:`;
  const redis = await connectCoordination(REDIS_URL, 2000);
  const keys = new ClusterKeys('leases', prefix);
  const timing: LeaseTiming = { leaseMs: 300, safetyMarginMs: 30 };
  const target = { key: keys.lease('s/0'), epochKey: keys.epoch('s/0'), what: 'partition s/0' };
  try {
    const a = await acquireLease(redis, target, 'A', timing);
    assert.equal(a.kind, 'acquired');
    if (a.kind !== 'acquired') return;
    assert.equal(a.lease.epoch, 1);
    assert.equal((await acquireLease(redis, target, 'B', timing)).kind, 'held', 'one holder at a time');
    assert.deepEqual(await renewLeases(redis, [a.lease], timing.leaseMs), [], 'the holder renews');
    a.lease.check();

    await until('the lease to run out in Redis', async () => (await redis.exists(target.key)) === 0);
    const b = await acquireLease(redis, target, 'B', timing);
    assert.equal(b.kind === 'acquired' && b.lease.epoch, 2, 'the next owner gets the next epoch');
    assert.deepEqual(await renewLeases(redis, [a.lease], timing.leaseMs), [a.lease], 'the old holder finds its lease lost');
    assert.throws(() => a.lease.check(), (err: unknown) => err instanceof FencedError && err.epoch === 1 && /lost/.test(err.message));
    assert.equal(await releaseLease(redis, a.lease), false, 'the old holder cannot release the new lease');
    assert.equal(await redis.get(target.key), 'B 2');

    await redis.hset(keys.assignment, 's/0', 'C');
    const withAssignment = { ...target, assignment: { key: keys.assignment, unit: 's/0' } };
    if (b.kind === 'acquired') assert.equal(await releaseLease(redis, b.lease), true);
    assert.equal((await acquireLease(redis, withAssignment, 'B', timing)).kind, 'not-assigned', 'only the assignee takes the lease');
    const c = await acquireLease(redis, withAssignment, 'C', timing);
    assert.equal(c.kind === 'acquired' && c.lease.epoch, 3);
    if (c.kind === 'acquired') await releaseLease(redis, c.lease);

    assert.equal(await raiseEpoch(redis, target.epochKey, 10), 10, 'a counter behind a store is raised');
    assert.equal(await raiseEpoch(redis, target.epochKey, 5), 10, 'never lowered');
    const d = await acquireLease(redis, withAssignment, 'C', timing);
    assert.equal(d.kind === 'acquired' && d.lease.epoch, 11);
  } finally {
    redis.disconnect();
    await deleteKeys(prefix);
  }
});

test('a lease seen run out stays fenced: a renewal answered after that check does not revive it (a renewal with no check in between does)', async (t) => {
  if (await skipWithoutRedis(t)) return;
  const prefix = `sfc-test-${process.pid}-ranout:`;
  const redis = await connectCoordination(REDIS_URL, 2000);
  const keys = new ClusterKeys('leases', prefix);
  // Redis' TTL is 10 s of real time; the lease's local clock is the test's.
  const timing: LeaseTiming = { leaseMs: 10_000, safetyMarginMs: 1000 };
  let now = 0;
  const clock = () => now;
  try {
    const target = (u: string) => ({ key: keys.lease(u), epochKey: keys.epoch(u), what: `partition ${u}` });
    const a = await acquireLease(redis, target('s/0'), 'A', timing, clock);
    const b = await acquireLease(redis, target('s/1'), 'A', timing, clock);
    assert.ok(a.kind === 'acquired' && b.kind === 'acquired');
    // The holder's main thread is held past the local deadline (9 s here), then a renewal is
    // sent; the key in Redis still holds the epoch, so Redis renews it.
    now = 9_500;
    assert.throws(() => a.lease.check(), (err: unknown) => err instanceof FencedError && /ran out 500 ms ago/.test(err.message), 'a checkpoint (or a commit) sees the lease run out');
    assert.deepEqual(await renewLeases(redis, [a.lease, b.lease], timing.leaseMs, clock), [], 'Redis renews both keys');
    assert.equal(a.lease.held, false, 'the lease seen run out is not held again');
    assert.throws(() => a.lease.check(), (err: unknown) => err instanceof FencedError && /lost \(ran out 500 ms ago/.test(err.message));
    assert.equal(b.lease.held, true, 'nothing checked b past its deadline: the renewal keeps it');
    b.lease.check();
  } finally {
    redis.disconnect();
    await deleteKeys(prefix);
  }
});

test('a partition whose lease ran out commits nothing more; its store and its receivers refuse the older epoch', async (t) => {
  if (await skipWithoutRedis(t)) return;
  const prefix = `sftest-${process.pid}-fence:`;
  const broker = await RedisStreamsBroker.connect({ url: REDIS_URL, prefix, heartbeatMs: 100, deadAfterMs: 1500, blockMs: 100 });
  const { dir, cleanup } = tempDir('sf-cluster-fence-');
  const { clicks, topology } = clusterClickTopology();
  const stopped: Array<{ unit: string; reason: unknown }> = [];
  const host = await startPartitionHost(topology, {
    broker, dataDir: dir, logger: quiet,
    onPartitionStopped: (stage, partition, reason) => stopped.push({ unit: `${stage}/${partition}`, reason }),
  });
  // Leases on a clock the test moves: the same Lease objects a worker holds, without waiting.
  let now = 0;
  const timing: LeaseTiming = { leaseMs: 1000, safetyMarginMs: 100 };
  const lease = (unit: string, epoch: number) => new Lease(`lease:${unit}`, 'w', epoch, timing, now, `partition ${unit}`, () => now);
  // Hosts of partition 0 of `count` only, so the fenced partition gets the later clicks.
  const hosts = Array.from({ length: 200 }, (_, i) => `h${i}.example`).filter((h) => clicks.topicOf({ host: h, n: 0 }).partition === 0).slice(0, 5);
  const { deltas: deltaNs } = clusterClickTopology();
  assert.ok(hosts.some((h) => deltaNs.topicOf({ host: h, delta: 0 }).partition === 0), 'the hosts send deltas to totals partition 0, where the late message goes');
  const total = async () => (await host.ask('totals', 0, 'hosts')).concat(await host.ask('totals', 1, 'hosts')).reduce((a, [, n]) => a + n, 0);
  const counted = async () => (await host.ask('count', 0, 'hosts')).reduce((a, [, n]) => a + n, 0);
  try {
    const old = lease('count/0', 1);
    await host.startPartition('count', 0, old);
    await host.startPartition('totals', 0, lease('totals/0', 1));
    await host.startPartition('totals', 1, lease('totals/1', 1));
    const producer = await openExternalProducer({ broker, dataDir: dir, namespace: clicks, name: 'clicks-src' });
    for (let i = 0; i < 50; i++) await producer.send({ host: hosts[i % hosts.length]!, n: i });
    await until('50 clicks counted', async () => (await total()) === 50);

    now += timing.leaseMs; // count/0's lease runs out; the receivers run under leases taken at the new time
    for (const p of [0, 1]) {
      await host.stopPartition('totals', p);
      await host.startPartition('totals', p, lease(`totals/${p}`, 2));
    }
    for (let i = 50; i < 60; i++) await producer.send({ host: hosts[i % hosts.length]!, n: i });
    const fenced = await until('count/0 to stop fenced', async () => stopped.find((s) => s.unit === 'count/0'));
    assert.ok(fenced.reason instanceof FencedError, `stopped by its fence: ${String(fenced.reason)}`);
    assert.match((fenced.reason as Error).message, /ran out/);
    assert.deepEqual(host.partitions().map((p) => `${p.stage}/${p.partition}`).sort(), ['totals/0', 'totals/1']);

    const store = await Store.open({ path: `${dir}/stages/count/p0`, columnFamilies: stageColumnFamilies(topology.stages[0]!.def.columnFamilies ?? {}) });
    let committed = 0;
    for await (const [, v] of store.iterate('hosts')) committed += Number(v.readBigInt64LE());
    assert.equal(committed, 50, 'nothing of the 10 later clicks was committed under the expired lease');
    assert.equal(await readOwnerEpoch(store), 1);
    await store.close();

    const next = lease('count/0', 2);
    await host.startPartition('count', 0, next);
    await until('the next owner counts the 10 clicks again delivered', async () => (await total()) === 60);
    assert.equal(await counted(), 60);
    await host.stopPartition('count', 0);
    await assert.rejects(host.startPartition('count', 0, lease('count/0', 1)), (err: unknown) => err instanceof FencedError && err.newer === 2, 'the store refuses the older owner');

    // The old owner wakes up and publishes under its epoch, even at the top of its range.
    const late = await broker.producer(topic('host-deltas', partitionId(0)), { producer: producerId('count@0') });
    await late.send(deltaNs.codec.encode({ host: 'late.example', delta: 1000 }), { sequence: epochSequence(1, 2 ** 32 - 1) });
    await host.startPartition('count', 0, lease('count/0', 3));
    for (let i = 60; i < 70; i++) await producer.send({ host: hosts[i % hosts.length]!, n: i });
    await until('the new owner\'s clicks counted', async () => (await total()) === 70);
    const dead = await until('the late message dead-lettered', async () => {
      const d = await broker.deadLetters(topic('host-deltas', partitionId(0)), 'totals');
      return d.length > 0 && d;
    });
    assert.equal(dead.length, 1);
    assert.equal(await total(), 70, 'the late message did not count, the new owner\'s did');
    assert.match(dead[0]!.reason, /epoch 1 .* older than its epoch [23] already applied/);
    assert.equal(dead[0]!.message.sequence, sequence(epochSequence(1, 2 ** 32 - 1)));
    await producer.close();
    await late.close();
  } finally {
    await host.stop();
    await broker.close();
    await deleteKeys(prefix);
    cleanup();
  }
});
