import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { RedisStreamsBroker } from '../src/runtime/brokers/redis-streams.js';
import { subscriptionKeys } from '../src/runtime/brokers/redis/keys.js';
import { partitionId } from '../src/runtime/ids.js';
import { topic, topicName, type Topic } from '../src/runtime/topics.js';
import { brokerConformance, eventually, type ForeignEntry } from './kit/brokers.js';

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
