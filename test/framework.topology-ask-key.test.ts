import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as turn } from 'node:timers/promises';
import {
  DEFAULT_QUIESCENCE_TIMEOUT_MS, JobStalledError, MemoryBroker, Topology, decodeInt64, defineNamespace, encodeInt64, int64Add, msgpackCodec, type Logger,
} from '../src/index.js';
import { ManualClock } from '../src/testing/index.js';
import { tempDir } from './kit/datasets.js';

/**
 * Two things a first user of `RunningTopology` asked for (issue 14, item 8): `askKey` asks the
 * partition that owns a key without the caller computing it, and `quiescence()` without options
 * gives up after its default timeout instead of polling forever when a message never settles.
 */
interface Visit { readonly user: string }
const isVisit = (v: unknown): v is Visit => typeof (v as Visit)?.user === 'string';
const quiet: Logger = { debug() {}, warn() {}, error() {} };

test('askKey reaches the partition that owns the key, askAll shows the key on that partition only', { timeout: 120_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-ask-key-');
  const visits = defineNamespace('visits', { codec: msgpackCodec('Visit', isVisit), partitions: 8, key: (v: Visit) => v.user });
  const topology = Topology.create('ask-key').stage('users', {
    input: visits,
    columnFamilies: { count: { mergeOperator: int64Add() } },
    onMessage: (ctx, v) => ctx.writes.merge('count', v.user, encodeInt64(1)),
    async query(reads, user: string) {
      const v = await reads.get('count', user);
      return v ? decodeInt64(v) : 0n;
    },
  });
  const broker = new MemoryBroker();
  const running = await topology.start({ broker, dataDir: dir, logger: quiet });
  try {
    const producer = await running.producer(visits, 'visits-src');
    const expected = new Map<string, bigint>();
    for (let i = 0; i < 400; i++) {
      const user = `user-${(i * 7) % 23}`;
      await producer.send({ user });
      expected.set(user, (expected.get(user) ?? 0n) + 1n);
    }
    await running.quiescence({ timeoutMs: 60_000 });
    const owners = new Set<number>();
    for (const [user, n] of expected) {
      assert.equal(await running.askKey('users', user, user), n, `askKey for ${user}`);
      // The key lives on exactly one partition: the one askKey asked.
      const counts = await running.askAll('users', user);
      const holding = counts.flatMap((c, p) => (c > 0n ? [p] : []));
      assert.deepEqual(holding, [visits.partitioner.forKey(user)], `partitions holding ${user}`);
      owners.add(holding[0]!);
    }
    assert.ok(owners.size > 1, 'the users spread over several partitions');
    await assert.rejects(running.askKey('no-such-stage' as 'users', 'user-1', 'user-1'), RangeError);
  } finally {
    await running.stop();
    await broker.close();
    cleanup();
  }
});

test('quiescence() without options fails after the default timeout when a message never settles; Infinity waits', { timeout: 120_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-quiescence-');
  const visits = defineNamespace('visits', { codec: msgpackCodec('Visit', isVisit), partitions: 2, key: (v: Visit) => v.user });
  let release!: () => void;
  const stuck = new Promise<void>((resolve) => (release = resolve));
  let entered = false;
  const topology = Topology.create('stuck').stage('users', {
    input: visits,
    columnFamilies: { count: { mergeOperator: int64Add() } },
    async onMessage(ctx, v) {
      entered = true;
      await stuck; // a handler that hangs until the test releases it
      ctx.writes.merge('count', v.user, encodeInt64(1));
    },
  });
  const clock = new ManualClock(0);
  const broker = new MemoryBroker();
  const running = await topology.start({ broker, dataDir: dir, logger: quiet, clock });
  // Moves the manual clock in steps, letting the polls' continuations run between them.
  const advance = async (ms: number, step = 1000) => {
    for (let t = 0; t < ms; t += step) {
      clock.advance(step);
      for (let i = 0; i < 5; i++) await turn();
    }
  };
  try {
    const producer = await running.producer(visits, 'visits-src');
    await producer.send({ user: 'u1' });
    while (!entered) await turn();

    const waits: { bounded: unknown; unbounded: unknown } = { bounded: 'pending', unbounded: 'pending' };
    running.quiescence().then(() => (waits.bounded = 'resolved'), (err: unknown) => (waits.bounded = err));
    await advance(DEFAULT_QUIESCENCE_TIMEOUT_MS - 10_000);
    assert.equal(waits.bounded, 'pending', 'still waiting before the default timeout');
    await advance(20_000);
    const stalled: unknown = waits.bounded;
    assert.ok(stalled instanceof JobStalledError, `rejected with JobStalledError, got ${String(stalled)}`);
    assert.match(stalled.message, /not quiet after 300000 ms \(messages in flight per namespace: visits: 1\)/);

    running.quiescence({ timeoutMs: Infinity }).then(() => (waits.unbounded = 'resolved'), (err: unknown) => (waits.unbounded = err));
    await advance(2 * DEFAULT_QUIESCENCE_TIMEOUT_MS, 10_000);
    assert.equal(waits.unbounded, 'pending', 'timeoutMs: Infinity still waits after twice the default');
    release();
    for (let i = 0; i < 10_000 && waits.unbounded === 'pending'; i++) await advance(20, 20);
    assert.equal(waits.unbounded, 'resolved');
  } finally {
    release();
    await running.stop();
    await broker.close();
    cleanup();
  }
});

test('a query hook that throws answers the asker with its error once: no retry, no restart of the partition', { timeout: 60_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-ask-throws-');
  const visits = defineNamespace('visits', { codec: msgpackCodec('Visit', isVisit), partitions: 2, key: (v: Visit) => v.user });
  let calls = 0;
  const topology = Topology.create('ask-throws').stage('users', {
    input: visits,
    query(_reads, user: string) {
      calls++;
      if (user === 'nobody') throw new RangeError(`no user ${user}`);
      return user.length;
    },
  });
  const running = await topology.start({ broker: new MemoryBroker(), dataDir: dir, logger: quiet });
  try {
    await assert.rejects(running.ask('users', 1, 'nobody'), (err: unknown) => err instanceof RangeError && err.message === 'no user nobody');
    assert.equal(calls, 1, 'asked once, not retried');
    assert.equal(await running.ask('users', 1, 'ada'), 3, 'the partition answers the next ask');
    const restarts = (running.system.tree().children ?? []).flatMap((stage) => stage.children ?? []).reduce((n, p) => n + p.restarts, 0);
    assert.equal(restarts, 0, 'no partition restarted');
  } finally {
    await running.stop();
    cleanup();
  }
});
