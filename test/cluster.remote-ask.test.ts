import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AskTimeoutError, RemoteAskError, partitionId, producerId, type ClusterStatus } from '../src/index.js';
import { topic } from '../src/runtime/brokers/index.js';
import { ClusterRun, until, withClusterRun, type WorkerProcess } from './kit/clusterRun.js';
import { REDIS_URL, skipWithoutRedis } from './kit/cluster.js';
import { Redis } from 'ioredis';
import { streamKey } from '../src/runtime/brokers/redis/keys.js';
import { replyTopic } from '../src/cluster/askWire.js';

/**
 * Remote asks (`connectClusterClient`, docs/cluster.md "Asking partitions across the
 * cluster") to the two-stage click counter (count: 6 partitions, totals: 2) run by worker
 * processes (test/kit/clusterWorker.ts) over Redis Streams; the client runs in the test
 * process. The stages answer `HostsQuery` (test/kit/twoStageClicks.ts): `'hosts'`, a
 * `{ fail }` that throws, a `{ slowMs }` that answers the pid of the process that ran it.
 * Lease 3000 ms, as the other cluster tests.
 */
const LEASE_MS = 3000;

async function cluster(t: import('node:test').TestContext, body: (run: ClusterRun) => Promise<void>): Promise<void> {
  if (await skipWithoutRedis(t)) return;
  await withClusterRun(t, LEASE_MS, {}, body);
}

type Pairs = Array<[string, number]>;
const sum = (answers: unknown[]) => {
  const m = new Map<string, number>();
  for (const a of answers as Pairs[]) for (const [h, n] of a) m.set(h, (m.get(h) ?? 0) + n);
  return new Map([...m].sort());
};
const ownerOf = (s: ClusterStatus, unit: string, workers: readonly WorkerProcess[]) => workers.find((w) => w.id === s.partitions.find((p) => p.unit === unit)!.owner)!;

test('asks to every partition of both stages are answered by the three workers that own them, with exact counts', async (t) => {
  await cluster(t, async (run) => {
    const workers = [await run.startWorker('w1'), await run.startWorker('w2'), await run.startWorker('w3')];
    await run.balancedOn(workers);
    await run.send(600);
    const s = await run.quiet(workers);
    const client = await run.client();
    assert.deepEqual(sum(await client.askAll('count', 'hosts')), new Map([...run.truth].sort()), 'count: every host counted exactly, read from 6 partitions');
    assert.deepEqual(sum(await client.askAll('totals', 'hosts')), new Map([...run.truth].sort()), 'totals: the same counts from 2 partitions');
    // askKey routes a key to the partition that holds it, by the recorded partitioner (found
    // by a new user: the client had no askKey, and routing by hand needed the namespace).
    for (const stage of ['count', 'totals']) {
      for (const [host, n] of run.truth) {
        const answer = (await client.askKey(stage, host, 'hosts')) as Pairs;
        assert.ok(answer.some(([h, c]) => h === host && c === n), `${stage}: askKey(${host}) asks the partition that counts it (${JSON.stringify(answer)})`);
      }
    }
    // Who answered: each unit's answer comes from its owner's process.
    const pids = new Set<number>();
    for (const stage of ['count', 'totals']) {
      const answers = (await client.askAll(stage, { slowMs: 0 })) as Pairs[];
      answers.forEach((a, p) => {
        const owner = s.workers.find((w) => w.id === s.partitions.find((u) => u.unit === `${stage}/${p}`)!.owner)!;
        assert.deepEqual(a, [['pid', owner.pid]], `${stage}/${p} answered by its owner ${owner.id}`);
        pids.add(owner.pid);
      });
    }
    assert.equal(pids.size, 3, 'all three workers answered');
    await run.stopAll();
  });
});

test('an error thrown by the query hook reaches the client with its message; the partition keeps answering', async (t) => {
  await cluster(t, async (run) => {
    const w1 = await run.startWorker('w1');
    await run.allRunningOn([w1]);
    const client = await run.client();
    await assert.rejects(client.ask('count', 2, { fail: 'no such report: q-17' }), (err: unknown) => {
      assert.ok(err instanceof RemoteAskError, String(err));
      assert.equal(err.message, 'no such report: q-17');
      assert.equal(err.remoteName, 'Error');
      assert.equal(err.code, 'SF_ERR_REMOTE_ASK');
      assert.equal(err.worker, w1.id);
      assert.deepEqual([err.stage, err.partition], ['count', 2]);
      return true;
    });
    assert.deepEqual(await client.ask('count', 2, 'hosts'), [], 'the same partition answers the next ask');
    assert.ok(!w1.events.some((e) => ['fenced', 'failed'].includes(e.event.type)), 'the failed query stopped no partition');
    await assert.rejects(client.ask('nope', 0, 'hosts'), /has no stage "nope" \(its stages: count, totals\)/);
    await assert.rejects(client.ask('totals', 2, 'hosts'), RangeError);
    // A request that does not decode is dead-lettered with its reason; the next one is answered.
    const garbage = await run.broker.producer(topic('sf-ask-count', partitionId(2)), { producer: producerId('foreign') });
    await garbage.send(new Uint8Array([0xc1]));
    await garbage.close();
    const dead = await until('the undecodable request dead-lettered', async () => {
      const d = await run.broker.deadLetters(topic('sf-ask-count', partitionId(2)), 'sf-ask');
      return d.length > 0 && d;
    }, 10_000);
    assert.match(dead[0]!.reason, /^AskRequest: /, 'the codec says why');
    assert.deepEqual(await client.ask('count', 2, 'hosts'), []);
    // A query slower than the ask's timeout: the timeout names the running owner and what holds
    // it (found by a new user: a 40 s query was reported as "no worker ran it").
    await assert.rejects(client.ask('count', 3, { slowMs: 3000 }, { timeoutMs: 1000 }), (err: unknown) =>
      err instanceof AskTimeoutError && new RegExp(`no answer from count/3 within 1000 ms \\(running on ${w1.id!.replace('.', '\\.')}, which did not answer in time: the query is slow, or its partition is held`).test(err.message));
    await run.stopAll();
  });
});

test('an ask in flight when its owner is SIGKILLed is answered by the next owner', async (t) => {
  await cluster(t, async (run) => {
    const workers = [await run.startWorker('w1'), await run.startWorker('w2'), await run.startWorker('w3')];
    const s = await run.balancedOn(workers);
    const victim = ownerOf(s, 'count/4', workers);
    const client = await run.client();
    const askedAt = Date.now();
    const answer = client.ask('count', 4, { slowMs: 1500 }, { timeoutMs: 60_000 });
    await until('the slow query to run on its owner', async () => victim.stderr.includes('slow query count/4 started'), 10_000);
    victim.child.kill('SIGKILL');
    const [[, pid]] = (await answer) as Pairs as [[string, number]];
    const live = workers.filter((w) => w !== victim);
    const after = await run.allRunningOn(live);
    const next = ownerOf(after, 'count/4', live);
    assert.notEqual(pid, victim.child.pid, 'not answered by the killed worker');
    assert.equal(pid, next.child.pid, 'answered by the unit\'s next owner');
    t.diagnostic(`answered ${Date.now() - askedAt} ms after the ask (lease ${LEASE_MS} ms, query 1500 ms, run twice)`);
    await run.stopAll();
  });
});

test('an ask before any worker runs the unit waits in the broker and is answered once a worker runs it', async (t) => {
  await cluster(t, async (run) => {
    await run.send(50);
    const client = await run.client();
    let settled = false;
    const answer = client.ask('totals', 1, 'hosts', { timeoutMs: 60_000 }).finally(() => (settled = true));
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(settled, false, 'no answer without an owner');
    const w1 = await run.startWorker('w1');
    await run.quiet([w1]);
    const pairs = (await answer) as Pairs;
    assert.ok(Array.isArray(pairs) && pairs.every(([h, n]) => typeof h === 'string' && Number.isInteger(n)), 'a hosts answer of totals/1');
    assert.ok(w1.events.some((e) => e.event.type === 'started' && e.event.unit === 'totals/1'));
    // Once it runs, the whole stage is answered, with exact counts.
    assert.deepEqual(sum(await client.askAll('totals', 'hosts')), new Map([...run.truth].sort()));
    await run.stopAll();
  });
});

// Found by a new user: after a broker outage longer than its consumer's reconnect timeout, a
// query server's cluster client never read a reply again (its reply consumer had failed) and
// every read waited out its timeout, for good. The client joins its reply subscription again.
// Here the reply consumer fails as it would after losing its stream: the stream is deleted.
test('a client whose reply consumer failed joins its reply subscription again and is answered', async (t) => {
  await cluster(t, async (run) => {
    const w1 = await run.startWorker('w1');
    await run.allRunningOn([w1]);
    const client = await run.client();
    assert.deepEqual(await client.ask('count', 1, 'hosts'), []);
    const redis = new Redis(REDIS_URL);
    try {
      assert.equal(await redis.del(streamKey(run.brokerPrefix, replyTopic(client.replySlot))), 1, 'the reply stream existed');
    } finally {
      redis.disconnect();
    }
    // The next asks are answered once the client subscribed again (well within their timeout).
    const started = Date.now();
    assert.deepEqual(await client.ask('count', 1, 'hosts', { timeoutMs: 30_000 }), []);
    assert.deepEqual(await client.ask('count', 2, 'hosts', { timeoutMs: 30_000 }), []);
    t.diagnostic(`answered again ${Date.now() - started} ms after the reply stream was lost`);
    await run.stopAll();
  });
});
