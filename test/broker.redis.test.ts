import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { RedisStreamsBroker } from '../src/runtime/brokers/redis-streams.js';
import { subscriptionKeys } from '../src/runtime/brokers/redis/keys.js';
import { partitionId, producerId } from '../src/runtime/ids.js';
import { topic, topicName, type Topic } from '../src/runtime/topics.js';
import { brokerConformance, eventually, pullAck, str, text, type ForeignEntry } from './kit/brokers.js';

const run = promisify(execFile);
const url = process.env.SHARDFLOW_REDIS_URL ?? 'redis://127.0.0.1:6379';
const scripts = fileURLToPath(new URL('../scripts/redis/', import.meta.url));
/** Keys of this run only, so that cleanup never touches anything else on the server. */
const prefix = `sftest-${process.pid}:`;
const maxPayloadBytes = 64 * 1024;
const options = { url, prefix, heartbeatMs: 100, deadAfterMs: 1500, blockMs: 100, connectTimeoutMs: 2000, maxPayloadBytes };

/** A raw XADD on the topic's stream, as a foreign producer writes it (our field names, its values). */
async function injectForeign(t: Topic, entry: ForeignEntry): Promise<void> {
  const r = new Redis(url);
  try {
    const fields: Array<string | Buffer> = [];
    if (entry.payload) fields.push('payload', Buffer.from(entry.payload));
    if (entry.producer !== undefined) fields.push('producer', entry.producer);
    if (entry.sequence !== undefined) fields.push('sequence', entry.sequence);
    // XADD needs one field-value pair: the nearest Redis has to an entry with no fields.
    if (fields.length === 0) fields.push('', '');
    await r.xadd(`${prefix}${topicName(t)}`, '*', ...fields);
  } finally {
    r.disconnect();
  }
}

brokerConformance({
  name: 'redis',
  async unavailable() {
    try {
      const b = await RedisStreamsBroker.connect(options);
      await b.close();
      return undefined;
    } catch (err) {
      return `${(err as Error).message} (start it with scripts/redis/start.sh)`;
    }
  },
  create: () => RedisStreamsBroker.connect(options),
  maxPayloadBytes,
  injectForeign,
  async loseData(t) {
    const r = new Redis(url);
    try {
      await r.del(`${prefix}${topicName(t)}`);
    } finally {
      r.disconnect();
    }
  },
  async restart() {
    await run('bash', [`${scripts}stop.sh`]);
    await run('bash', [`${scripts}start.sh`]);
  },
  async cleanup() {
    const r = new Redis(url);
    try {
      let cursor = '0';
      do {
        const [next, keys] = await r.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
        cursor = next;
        if (keys.length > 0) await r.del(...keys);
      } while (cursor !== '0');
    } finally {
      r.disconnect();
    }
  },
});

test('redis: the dead-letter stream is capped at about maxDeadLetters (XADD MAXLEN ~)', async (t) => {
  let b: RedisStreamsBroker;
  try {
    b = await RedisStreamsBroker.connect({ ...options, maxDeadLetters: 20 });
  } catch (err) {
    if (process.env.SHARDFLOW_REQUIRE_BROKERS === '1') throw err;
    t.skip(`redis unavailable: ${(err as Error).message}`);
    return;
  }
  const r = new Redis(url);
  try {
    const top = topic('links', partitionId(900_000_000 + (Date.now() % 1_000_000)));
    const n = 300;
    for (let i = 0; i < n; i++) await injectForeign(top, { payload: Buffer.from(`x${i}`), producer: 'foreign', sequence: 'not-a-number' });
    const c = await b.subscribe(top, { subscription: 'capped', type: 'shared' });
    let reported = 0;
    c.malformed$?.subscribe(() => reported++);
    await eventually(async () => reported, (k) => k === n, 30_000, 'malformed entries dead-lettered');
    const keys = subscriptionKeys(prefix, top, 'capped');
    const nodeMax = Number((await r.config('GET', 'stream-node-max-entries'))[1]);
    const len = await r.xlen(keys.dlq);
    assert.ok(len >= 20 && len <= 20 + nodeMax, `dead-letter stream holds ${len}, bound 20 (~, node size ${nodeMax})`);
    const dead = await b.deadLetters(top, 'capped');
    assert.equal(Buffer.from(dead.at(-1)!.message.payload).toString(), `x${n - 1}`, 'the newest are kept');
    assert.equal(Number((await r.xpending(keys.stream, 'capped'))[0]), 0, 'every malformed entry was acked');
    await c.close();
    const left = await r.keys(`${prefix}${topicName(top)}*`);
    if (left.length > 0) await r.del(...left);
  } finally {
    r.disconnect();
    await b.close();
  }
});

/** The test's broker, or undefined once the test is skipped because Redis is not there (a failure with SHARDFLOW_REQUIRE_BROKERS=1). */
async function brokerOrSkip(t: TestContext): Promise<RedisStreamsBroker | undefined> {
  try {
    return await RedisStreamsBroker.connect(options);
  } catch (err) {
    if (process.env.SHARDFLOW_REQUIRE_BROKERS === '1') throw err;
    t.skip(`redis unavailable: ${(err as Error).message}`);
    return undefined;
  }
}

/** A process holding failover subscription `subscription` of `top` (`c`, its consumer, in `body`). */
function holderProcess(top: Topic, subscription: string, receiverQueueSize: number, body: string): ChildProcess {
  const module = (path: string) => JSON.stringify(fileURLToPath(new URL(path, import.meta.url)));
  return spawn(process.execPath, ['--import', 'tsx', '-e', `
    const { RedisStreamsBroker } = await import(${module('../src/runtime/brokers/redis-streams.ts')});
    const { topic } = await import(${module('../src/runtime/topics.ts')});
    const { partitionId } = await import(${module('../src/runtime/ids.ts')});
    const b = await RedisStreamsBroker.connect(${JSON.stringify(options)});
    const c = await b.subscribe(topic('links', partitionId(${top.partition})), { subscription: '${subscription}', type: 'failover', receiverQueueSize: ${receiverQueueSize} });
    ${body}
  `], { stdio: ['ignore', 'pipe', 'inherit'] });
}

/** Kills the holder, removes the topic's keys, closes the connections. */
async function endHolderTest(holder: ChildProcess, r: Redis, top: Topic, b: RedisStreamsBroker): Promise<void> {
  holder.kill('SIGKILL');
  const left = await r.keys(`${prefix}${topicName(top)}*`);
  if (left.length > 0) await r.del(...left);
  r.disconnect();
  await b.close();
}

test('redis: a failover holder SIGKILLed after refreshing its liveness but before renewing its lock: its backlog comes first', { timeout: 60_000 }, async (t) => {
  const b = await brokerOrSkip(t);
  if (!b) return;
  const r = new Redis(url);
  const top = topic('links', partitionId(900_000_000 + (Date.now() % 1_000_000)));
  const keys = subscriptionKeys(prefix, top, 'killed-holder');
  // The holder: another process that takes 40 entries without acking them, then is killed.
  const holder = holderProcess(top, 'killed-holder', 40, `
    let n = 0;
    while (n < 40) n += (await c.receive(40 - n, 1000)).length;
    process.stdout.write('held ' + n + '\\n');
    setInterval(() => {}, 1 << 30);
  `);
  try {
    const p = await b.producer(top, { producer: producerId('p') });
    for (let i = 0; i < 40; i++) await p.send(text('o', i));
    await p.flush();
    await new Promise<void>((done, fail) => {
      let out = '';
      holder.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('held 40')) done();
      });
      holder.on('exit', (code) => fail(new Error(`the holder exited ${code} before holding 40 entries`)));
    });
    const standby = await b.subscribe(top, { subscription: 'killed-holder', type: 'failover', receiverQueueSize: 5, nackRedeliveryDelayMs: 100 });
    holder.kill('SIGKILL');
    // Killed between its two heartbeat commands: the lock goes first, its liveness key stays
    // for deadAfterMs (1.5 s here) more.
    await r.del(keys.lock);
    for (let i = 40; i < 50; i++) await p.send(text('o', i));
    await p.flush();
    await p.close();
    const got = await pullAck(standby, 50, 20_000);
    assert.deepEqual(got.map(str), Array.from({ length: 50 }, (_, i) => `o:${i}`), 'the killed holder\'s backlog, in order, before what was sent after');
    await standby.close();
  } finally {
    await endHolderTest(holder, r, top, b);
  }
});

test('redis: a failover holder paused past its lease (SIGSTOP) reads nothing once it wakes: the next holder gets every entry, in order', { timeout: 60_000 }, async (t) => {
  const b = await brokerOrSkip(t);
  if (!b) return;
  const r = new Redis(url);
  const top = topic('links', partitionId(900_000_000 + ((Date.now() + 7) % 1_000_000)));
  const keys = subscriptionKeys(prefix, top, 'paused-holder');
  // Found by a new user: a worker SIGSTOPped for 15 s and woken lost entries. Woken, its fetch
  // loop read new entries before its heartbeat saw the lock gone; they sat in its pending list
  // and reached the next holder after newer ones, which per-producer marks drop.
  const holder = holderProcess(top, 'paused-holder', 40, `
    for (;;) for (const m of await c.receive(40, 1000)) { await c.ack(m); process.stdout.write('got ' + Buffer.from(m.payload).toString() + '\\n'); }
  `);
  let out = '';
  holder.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  try {
    const p = await b.producer(top, { producer: producerId('p') });
    for (let i = 0; i < 10; i++) await p.send(text('o', i));
    await p.flush();
    await eventually(async () => out, (o) => o.includes('got o:9'), 20_000, 'the holder got the first 10');
    const first = await r.get(keys.lock);
    holder.kill('SIGSTOP');
    const standby = await b.subscribe(top, { subscription: 'paused-holder', type: 'failover', receiverQueueSize: 40 });
    // The lease (deadAfterMs, 1.5 s) runs out; the standby takes the lock at a heartbeat.
    await eventually(() => r.get(keys.lock), (l) => l !== null && l !== first, 10_000, 'the standby takes the lock');
    for (let i = 10; i < 30; i++) await p.send(text('o', i));
    await p.flush();
    const before = out;
    holder.kill('SIGCONT');
    for (let i = 30; i < 50; i++) await p.send(text('o', i));
    await p.flush();
    await p.close();
    const got = await pullAck(standby, 40, 20_000);
    assert.deepEqual(got.map(str), Array.from({ length: 40 }, (_, i) => `o:${i + 10}`), 'every entry sent after the pause, in order, to the next holder');
    await new Promise((done) => setTimeout(done, 300));
    assert.equal(out, before, 'the woken holder read nothing');
    await standby.close();
  } finally {
    await endHolderTest(holder, r, top, b);
  }
});

test('redis: a handover scores entries by id, so claims take them oldest first with a range read (no sort of every due id)', async (t) => {
  const r = new Redis(url);
  try {
    await r.ping();
  } catch (err) {
    r.disconnect();
    if (process.env.SHARDFLOW_REQUIRE_BROKERS === '1') throw err;
    t.skip(`Redis unavailable: ${(err as Error).message}`);
    return;
  }
  const { runScript } = await import('../src/runtime/brokers/redis/scripts.js');
  const stream = `${prefix}handover-order-${Date.now()}`;
  const ready = `${stream}:ready`;
  try {
    // 25 entries in one ms (seq 0..24: 'ms-10' sorts before 'ms-9' as text), then 5 in the next.
    const ids: string[] = [];
    for (let seq = 0; seq < 25; seq++) ids.push(await r.xadd(stream, `5000-${seq}`, 'f', String(seq)) as string);
    for (let seq = 0; seq < 5; seq++) ids.push(await r.xadd(stream, `5001-${seq}`, 'f', String(25 + seq)) as string);
    await r.xgroup('CREATE', stream, 'g', '0');
    await r.xreadgroup('GROUP', 'g', 'old', 'COUNT', 100, 'STREAMS', stream, '>');
    // A nacked entry already waiting keeps its due time (ZADD NX), after every handed-over one.
    await r.zadd(ready, Date.now() + 60_000, '5000-3');
    assert.equal(await runScript(r, 'sfHandover', [stream, ready, `${stream}:alive:old`], ['g', 'old']), 30);
    const members = await r.zrange(ready, '0', '-1', 'WITHSCORES');
    const order = members.filter((_, i) => i % 2 === 0);
    assert.deepEqual(order, [...ids.filter((id) => id !== '5000-3'), '5000-3'], 'the set orders handed-over entries by id, the nacked one last');
    assert.ok(Number(members[1]) < 0, 'handed-over entries are due at once (negative scores)');
    // Claims of 7 at a time take them in id order, and say when due entries are left.
    const claimed: string[] = [];
    for (;;) {
      const [out, , left] = (await runScript(r, 'sfClaimReady', [stream, ready], ['g', 'new', 7])) as [Array<[string, unknown, number]>, unknown, number];
      claimed.push(...out.map((e) => String(e[0])));
      if (left === 0) break;
    }
    assert.deepEqual(claimed, ids.filter((id) => id !== '5000-3'), 'oldest id first, every handed-over entry once');
    assert.deepEqual(await r.zrange(ready, '0', '-1'), ['5000-3'], 'the nacked entry waits for its due time');
  } finally {
    await r.del(stream, ready);
    r.disconnect();
  }
});
