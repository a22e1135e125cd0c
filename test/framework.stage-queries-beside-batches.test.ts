import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { MemoryBroker, Topology, decodeInt64, defineNamespace, encodeInt64, int64Add, msgpackCodec, type Logger, type StageReads } from '../src/index.js';
import { MAX_CONCURRENT_QUERIES, QUERY_STOP_GRACE_MS } from '../src/runtime/stream/stageActor.js';
import { tempDir } from './kit/datasets.js';

/**
 * A stage's queries run beside its batches, each on a snapshot taken when it arrived (a new
 * user's 40 s query held its partition's messages and a hand-back for 39 s when they ran in
 * the actor one at a time): a slow query neither holds the batches nor the other queries,
 * and it reads the state as committed when it arrived, whatever is committed meanwhile.
 */
interface Visit { readonly user: string }
const isVisit = (v: unknown): v is Visit => typeof (v as Visit)?.user === 'string';
const quiet: Logger = { debug() {}, warn() {}, error() {} };
type Ask = { user: string; gate?: number };
/** One partition, so every query and batch meets on the same actor. */
const visits = defineNamespace('visits', { codec: msgpackCodec('Visit', isVisit), partitions: 1, key: (v: Visit) => v.user });

/** A topology of one stage counting visits per user (`onMessage` may replace the count), asked through `query`. */
function counting<R>(name: string, query: (reads: StageReads<'count'>, user: string) => Promise<R>, onMessage?: (v: Visit) => void) {
  return Topology.create(name).stage('users', {
    input: visits,
    columnFamilies: { count: { mergeOperator: int64Add() } },
    onMessage: (ctx, v) => {
      onMessage?.(v);
      ctx.writes.merge('count', v.user, encodeInt64(1));
    },
    query,
  });
}

/** A promise and the function that resolves it: a query tells the test it started. */
function latch(): { reached: Promise<void>; reach: () => void } {
  let reach!: () => void;
  const reached = new Promise<void>((resolve) => (reach = resolve));
  return { reached, reach };
}

test('a slow query holds neither the partition nor other queries, and reads its arrival snapshot', { timeout: 120_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-queries-beside-');
  const gates = new Map<number, { open: () => void; opened: Promise<void> }>();
  const gate = (n: number) => {
    let g = gates.get(n);
    if (!g) {
      let open!: () => void;
      const opened = new Promise<void>((resolve) => (open = resolve));
      gates.set(n, (g = { open, opened }));
    }
    return g;
  };
  let entered = 0;
  const topology = Topology.create('queries-beside').stage('users', {
    input: visits,
    columnFamilies: { count: { mergeOperator: int64Add() } },
    onMessage: (ctx, v) => ctx.writes.merge('count', v.user, encodeInt64(1)),
    async query(reads, ask: Ask) {
      if (ask.gate !== undefined) {
        entered++;
        await gate(ask.gate).opened; // the read comes after the wait
      }
      const v = await reads.get('count', ask.user);
      // Two reads of one query agree: one snapshot.
      let iterated = 0n;
      for await (const [k, value] of reads.iterate('count')) if (k.toString() === ask.user) iterated = decodeInt64(value);
      assert.equal(iterated, v ? decodeInt64(v) : 0n);
      return v ? decodeInt64(v) : 0n;
    },
  });
  const broker = new MemoryBroker();
  const running = await topology.start({ broker, dataDir: dir, logger: quiet });
  try {
    const producer = await running.producer(visits, 'visits-src');
    const count = (gateNo?: number) => running.askKey('users', 'ann', gateNo === undefined ? { user: 'ann' } : { user: 'ann', gate: gateNo });
    const until = async (n: bigint) => {
      for (let i = 0; i < 600 && (await count()) !== n; i++) await sleep(50);
      assert.equal(await count(), n);
    };
    for (let i = 0; i < 10; i++) await producer.send({ user: 'ann' });
    await until(10n);

    // A query that waits (as a slow one would), asked when 10 were committed.
    const slow = count(1);
    let slowAnswer: bigint | undefined;
    void slow.then((v) => (slowAnswer = v));
    for (let i = 0; i < 200 && entered < 1; i++) await sleep(10);
    assert.equal(entered, 1, 'the slow query started');
    // Meanwhile the partition applies more messages and answers other queries.
    for (let i = 0; i < 15; i++) await producer.send({ user: 'ann' });
    await until(25n);
    assert.equal(slowAnswer, undefined, 'the slow query is still open');
    gate(1).open();
    assert.equal(await slow, 10n, 'it read what was committed when it arrived');

    // Past MAX_CONCURRENT_QUERIES open ones, the partition waits for the next before its next message.
    const open = Array.from({ length: MAX_CONCURRENT_QUERIES }, () => count(2));
    for (let i = 0; i < 400 && entered < 1 + MAX_CONCURRENT_QUERIES; i++) await sleep(10);
    assert.equal(entered, 1 + MAX_CONCURRENT_QUERIES);
    const held = count(2); // the one over the limit holds the mailbox
    for (let i = 0; i < 5; i++) await producer.send({ user: 'ann' });
    await sleep(300);
    gate(2).open();
    const answers = await Promise.all([...open, held]);
    assert.ok(answers.every((a) => a === 25n), `all read 25 (${[...new Set(answers)].join(', ')})`);
    await until(30n);
  } finally {
    for (const g of gates.values()) g.open();
    await running.stop();
    await broker.close();
    cleanup();
  }
});

test('a query still running when its partition stops is answered when it ends within the grace', { timeout: 120_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-queries-stop-');
  const { reached: inQuery, reach: started } = latch();
  const topology = counting('queries-stop', async (reads, user) => {
    started();
    await sleep(200); // inside the stop's grace
    const v = await reads.get('count', user);
    return v ? decodeInt64(v) : 0n;
  });
  const broker = new MemoryBroker();
  const running = await topology.start({ broker, dataDir: dir, logger: quiet });
  const producer = await running.producer(visits, 'visits-src');
  for (let i = 0; i < 3; i++) await producer.send({ user: 'bob' });
  await running.quiescence({ timeoutMs: 60_000 });
  const answer = running.askKey('users', 'bob', 'bob');
  await inQuery;
  const stopped = running.stop();
  assert.equal(await answer, 3n, 'answered from the snapshot before the store closed');
  await stopped;
  await broker.close();
  cleanup();
});

test('a query longer than the grace of a restart is tried again on the next incarnation, not failed', { timeout: 120_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-queries-restart-');
  let queries = 0;
  let failOnce = true;
  const { reached: inQuery, reach: started } = latch();
  const topology = counting(
    'queries-restart',
    async (reads, user) => {
      if (++queries === 1) {
        started();
        await sleep(QUERY_STOP_GRACE_MS + 800); // past the restart's grace: the store closes under it
      }
      const v = await reads.get('count', user);
      return v ? decodeInt64(v) : 0n;
    },
    (v) => {
      if (v.user === 'boom' && failOnce) {
        failOnce = false;
        throw new Error('a transient failure: the partition restarts');
      }
    },
  );
  const broker = new MemoryBroker();
  const running = await topology.start({ broker, dataDir: dir, logger: quiet });
  try {
    const producer = await running.producer(visits, 'visits-src');
    for (let i = 0; i < 3; i++) await producer.send({ user: 'bob' });
    await running.quiescence({ timeoutMs: 60_000 });
    const answer = running.askKey('users', 'bob', 'bob');
    await inQuery;
    await producer.send({ user: 'boom' }); // the batch fails, the supervisor restarts the partition
    assert.equal(await answer, 3n, 'answered by a try on the next incarnation');
    assert.ok(queries >= 2, `the query ran again (${queries} runs)`);
    await running.quiescence({ timeoutMs: 60_000 });
    assert.equal(await running.askKey('users', 'boom', 'boom'), 1n);
  } finally {
    await running.stop();
    await broker.close();
    cleanup();
  }
});

test('an ask whose query outlasts the stop of the topology fails at the end of the grace, not at its timeout', { timeout: 120_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-queries-topology-stop-');
  const { reached: inQuery, reach: started } = latch();
  const topology = counting('queries-topology-stop', async () => {
    started();
    await sleep(30_000); // far past the grace
    return 0n;
  });
  const broker = new MemoryBroker();
  const running = await topology.start({ broker, dataDir: dir, logger: quiet });
  try {
    const asked = Date.now();
    const answer = running.askKey('users', 'bob', 'bob', { timeoutMs: 60_000 });
    answer.catch(() => {});
    await inQuery;
    await running.stop();
    await assert.rejects(answer, (err: Error & { code?: string }) => /stopped/.test(err.message), 'the ask fails with the stop');
    const waited = Date.now() - asked;
    assert.ok(waited < 15_000, `the ask settled ${waited} ms after it was asked, not after its 60 s timeout`);
  } finally {
    await broker.close();
    cleanup();
  }
});
