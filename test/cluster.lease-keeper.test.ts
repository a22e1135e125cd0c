import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FencedError, InvalidArgumentError } from '../src/index.js';
import { ClusterKeys } from '../src/cluster/keys.js';
import { acquireLease, Lease, type LeaseTiming } from '../src/cluster/lease.js';
import { LeaseKeeper } from '../src/cluster/leaseKeeper.js';
import { connectCoordination } from '../src/cluster/redisConnection.js';
import { REDIS_URL, deleteKeys, skipWithoutRedis } from './kit/cluster.js';

/**
 * The lease keeper thread against the real Redis: it renews the membership key and the kept
 * leases while the event loop is blocked (past the lease, up to `maxStallMs`), stops once the
 * block outlasts `maxStallMs` (the leases then run out as before), marks a lease whose key
 * another holder took as lost, and renews nothing of a dropped lease.
 */

/** Blocks this thread's event loop for `ms` (a busy loop: timers, sockets and promises all wait). */
function blockEventLoop(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // busy
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The membership report the keeper writes for member `m1`. */
const report = () => ({ id: 'm1', name: 'm1', host: 'h', pid: process.pid, maxPartitions: null, startedAt: Date.now(), running: [], opening: [], failed: {}, inspectUrl: null });

async function setUp(name: string, maxStallMs: number) {
  const prefix = `sfc-test-${process.pid}-keeper-${name}:`;
  const redis = await connectCoordination(REDIS_URL, 2000);
  const keys = new ClusterKeys('keeper', prefix);
  const timing: LeaseTiming = { leaseMs: 600, safetyMarginMs: 60 };
  const problems: string[] = [];
  const failures: Error[] = [];
  const keeper = await LeaseKeeper.start({
    url: REDIS_URL, timing, heartbeatMs: 100, maxStallMs, connectTimeoutMs: 2000, slots: 2,
    membership: { key: keys.member('m1'), setKey: keys.members, id: 'm1' },
    onProblem: (m) => problems.push(m),
    onFailure: (err) => failures.push(err),
  });
  keeper.report(report());
  const acquire = async (unit: string): Promise<Lease> => {
    const got = await acquireLease(redis, { key: keys.lease(unit), epochKey: keys.epoch(unit), what: `partition ${unit}` }, 'm1', timing);
    assert.equal(got.kind, 'acquired');
    return (got as { lease: Lease }).lease;
  };
  const done = async () => {
    await keeper.close();
    await sleep(50);
    assert.deepEqual(failures, [], 'the thread ran until close(), which is no failure');
    await deleteKeys(prefix);
    redis.disconnect();
  };
  return { redis, keys, timing, keeper, problems, acquire, done };
}

type Keeper = Awaited<ReturnType<typeof setUp>>;

/** A test (skipped without Redis) on a keeper of its own, torn down after `body` whatever happens. */
function keeperTest(title: string, name: string, maxStallMs: number, body: (k: Keeper) => Promise<void>): void {
  test(title, async (t) => {
    if (await skipWithoutRedis(t)) return;
    const k = await setUp(name, maxStallMs);
    try {
      await body(k);
    } finally {
      await k.done();
    }
  });
}

keeperTest('the lease keeper renews leases and membership while the event loop is blocked past the lease', 'blocked', 5000, async (k) => {
  const lease = await k.acquire('s/0');
  k.keeper.keep(lease);
  await sleep(250);
  blockEventLoop(3 * k.timing.leaseMs);
  lease.check(); // renewed by the thread meanwhile: no FencedError
  assert.ok(lease.remainingMs() > 0, `the deadline moved on while blocked (${lease.remainingMs()} ms left)`);
  const ttl = await k.redis.pttl(k.keys.lease('s/0'));
  assert.ok(ttl > 0, `the key is still there in Redis (pttl ${ttl})`);
  assert.equal(await k.redis.get(k.keys.lease('s/0')), lease.value);
  assert.ok((await k.redis.pttl(k.keys.member('m1'))) > 0, 'the membership key was renewed too');
  assert.deepEqual(k.problems, []);

  k.keeper.drop(lease);
  await sleep(2 * k.timing.leaseMs);
  assert.equal(await k.redis.exists(k.keys.lease('s/0')), 0, 'a dropped lease is no longer renewed: it runs out in Redis');
  assert.throws(() => lease.check(), FencedError, 'and locally');
});

keeperTest('the lease keeper stops renewing once the event loop is blocked past maxStallMs', 'stalled', 1000, async (k) => {
  const lease = await k.acquire('s/0');
  k.keeper.keep(lease);
  await sleep(250);
  blockEventLoop(1000 + 2 * k.timing.leaseMs);
  // Nothing of this thread ran since the block: the keeper saw no stamp and renewed nothing.
  assert.ok(lease.remainingMs() <= 0, `the local deadline passed (${lease.remainingMs()} ms left)`);
  assert.equal(await k.redis.exists(k.keys.lease('s/0')), 0, 'the key ran out in Redis');
  assert.equal(await k.redis.exists(k.keys.member('m1')), 0, 'so did the membership key');
  await sleep(400);
  assert.equal(lease.remainingMs(), -Infinity, 'the keeper\'s first renewal after the stall found the key gone and marked the lease lost');
  assert.equal(await k.redis.exists(k.keys.lease('s/0')), 0, 'and did not bring it back');
  assert.throws(() => lease.check(), (err: unknown) => err instanceof FencedError && /no longer holds this epoch/.test(err.message));
  assert.ok(k.problems.some((p) => /has not turned for \d+ ms \(maxStallMs 1000\)/.test(p)), `the stall is reported: ${JSON.stringify(k.problems)}`);
});

keeperTest('the lease keeper marks a lease lost when another holder took its key, and reuses its slot', 'taken', 5000, async (k) => {
  const a = await k.acquire('s/0');
  const b = await k.acquire('s/1');
  k.keeper.keep(a);
  k.keeper.keep(b);
  const extra = await k.acquire('s/2');
  assert.throws(() => k.keeper.keep(extra), RangeError, 'two slots only');
  const otherClock = new Lease(k.keys.lease('s/3'), 'm1', 1, k.timing, 0, 'partition s/3', () => 0);
  assert.throws(() => k.keeper.keep(otherClock), InvalidArgumentError, 'a lease on another clock than the thread\'s');
  await k.redis.set(k.keys.lease('s/0'), 'other 99', 'PX', 10_000);
  await sleep(400);
  assert.throws(() => a.check(), (err: unknown) => err instanceof FencedError && /no longer holds this epoch/.test(err.message));
  b.check();
  k.keeper.drop(a);
  await k.redis.del(k.keys.lease('s/0'));
  const c = await k.acquire('s/0');
  k.keeper.keep(c); // a's slot, under a new registration: a's lost mark does not carry over
  await sleep(400);
  c.check();
  assert.ok(c.remainingMs() > k.timing.leaseMs - k.timing.safetyMarginMs - 200, `renewed in its reused slot (${c.remainingMs()} ms left)`);
});

keeperTest('the lease keeper leaves the cluster after its last membership write: the member key stays gone', 'leave', 5000, async (k) => {
  await sleep(250);
  assert.ok((await k.redis.pttl(k.keys.member('m1'))) > 0, 'a member while it beats');
  assert.ok((await k.redis.sismember(k.keys.members, 'm1')) === 1);
  await k.keeper.stopMembership();
  assert.equal(await k.redis.exists(k.keys.member('m1')), 0, 'the member key is deleted');
  assert.equal(await k.redis.sismember(k.keys.members, 'm1'), 0, 'and the id left the member set');
  k.keeper.report(report());
  await sleep(5 * 100);
  assert.equal(await k.redis.exists(k.keys.member('m1')), 0, 'no heartbeat writes it again, even with a new report');
});
