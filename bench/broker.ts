import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import WebSocket from 'ws';
import type { Broker } from '../src/runtime/brokers/broker.js';
import { batching } from '../src/runtime/brokers/interceptors/batching.js';
import { composeConsumer, composeProducer } from '../src/runtime/brokers/interceptors/compose.js';
import { compression, type CompressionCodec } from '../src/runtime/brokers/interceptors/compression.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { PulsarBroker } from '../src/runtime/brokers/pulsar/broker.js';
import { RedisStreamsBroker } from '../src/runtime/brokers/redis-streams.js';
import { partitionId, producerId } from '../src/runtime/ids.js';
import type { BrokerIdentity } from '../src/runtime/brokers/identity.js';
import { deleteBrokerScope, pulsarWebUrl } from '../src/runtime/brokers/scope.js';
import { benchOptions } from './lib/options.js';
import { topic } from '../src/runtime/topics.js';

/** Top-level fields of the result line besides bench/run.mjs's (checked by test/bench.smoke.test.ts). */
export const resultFields = ['smoke', 'params', 'brokers'] as const;

/**
 * Broker throughput: messages/s produced and consumed through batching + compression, per
 * broker; consumption is timed on the full backlog after producing (subscribe, receive,
 * ack), per broker (memory always; Redis and Pulsar when reachable). For Pulsar also a raw
 * `ws` producer loop against the same broker in the same run, and our producer's ratio to it.
 * Each run works in a scope of its own (Redis key prefix `sfbench-<run>:`, Pulsar tenant
 * `sfbench-<run>`), removed at the end (`deleteBrokerScope`), so runs leave nothing behind
 * on a shared server.
 *
 * Args: `--messages N` (20000), `--bytes B` payload size (256), `--batch N` (100),
 * `--codec lz4|none` (lz4), `--window N` sends in flight (2000), `--brokers memory,redis,pulsar`,
 * `--redis URL` (redis://127.0.0.1:6379), `--pulsar URL` (pulsar://127.0.0.1:8080, the web port).
 * `--smoke` (bench/lib/options.ts): 500 messages in batches of 20, 100 in flight.
 * A broker that cannot be reached is reported as `skipped` with the reason; with
 * `SHARDFLOW_REQUIRE_BROKERS=1` (as CI sets, like the broker tests) it fails the run instead.
 * @returns `{ smoke, params, brokers }`, `brokers` by name: produced_per_s, consumed_per_s,
 *   consumed, rss_mb (and raw_ws_per_s, ratio_to_raw for Pulsar), or `{ skipped: reason }`
 * @throws Error when a required broker is unreachable, or fewer messages than sent were consumed
 */
export async function run(args: string[]): Promise<Record<string, unknown>> {
  const o = benchOptions(args);
  const codec = o.string('--codec', 'lz4');
  if (codec !== 'lz4' && codec !== 'none') throw new RangeError(`--codec must be lz4 or none, got ${JSON.stringify(codec)}`);
  const params: Params = {
    messages: o.number('--messages', 20_000, 500),
    bytes: o.number('--bytes', 256),
    batch: o.number('--batch', 100, 20),
    codec,
    window: o.number('--window', 2000, 100),
  };
  const brokers = o.string('--brokers', 'memory,redis,pulsar').split(',');
  const redisUrl = o.string('--redis', 'redis://127.0.0.1:6379');
  const pulsarUrl = o.string('--pulsar', 'pulsar://127.0.0.1:8080');
  const required = process.env.SHARDFLOW_REQUIRE_BROKERS === '1';
  const run = randomUUID().slice(0, 8);
  const scopes: Record<string, BrokerIdentity> = {
    memory: { kind: 'memory' },
    redis: { kind: 'redis', url: redisUrl, scope: `sfbench-${run}:` },
    pulsar: { kind: 'pulsar', url: pulsarUrl, scope: `sfbench-${run}` },
  };
  const connectors: Record<string, () => Promise<Broker>> = {
    memory: async () => new MemoryBroker(),
    redis: () => RedisStreamsBroker.connect({ url: redisUrl, prefix: scopes.redis!.scope!, connectTimeoutMs: 2000 }),
    pulsar: () => PulsarBroker.connect({ webUrl: pulsarWebUrl(pulsarUrl), tenant: scopes.pulsar!.scope!, connectTimeoutMs: 5000 }),
  };
  const out: Record<string, Record<string, unknown>> = {};
  for (const name of brokers) {
    const connect = connectors[name];
    if (!connect) throw new RangeError(`unknown broker ${JSON.stringify(name)} (known: ${Object.keys(connectors).join(', ')})`);
    let broker: Broker;
    try {
      broker = await connect();
    } catch (err) {
      if (required) throw new Error(`${name} is required (SHARDFLOW_REQUIRE_BROKERS=1) but unavailable: ${(err as Error).message}`, { cause: err });
      out[name] = { skipped: (err as Error).message };
      continue;
    }
    let failed = true;
    try {
      const result: Record<string, unknown> = await measure(broker, params);
      if (name === 'pulsar') {
        const raw = await rawWsProducer(pulsarWebUrl(pulsarUrl).replace(/^http/, 'ws'), scopes.pulsar!.scope!, params);
        result.raw_ws_per_s = raw;
        result.ratio_to_raw = Number(((result.produced_per_s as number) / raw).toFixed(3));
      }
      result.rss_mb = Math.round(process.memoryUsage().rss / 2 ** 20);
      out[name] = result;
      failed = false;
    } finally {
      // The scope goes either way; when the measurement failed, its error is the one reported.
      await broker.close();
      const removed = deleteBrokerScope(scopes[name]!);
      if (failed) await removed.catch(() => undefined);
      else await removed;
    }
  }
  return { smoke: o.smoke, params, brokers: out };
}

interface Params {
  readonly messages: number;
  readonly bytes: number;
  readonly batch: number;
  readonly codec: CompressionCodec;
  readonly window: number;
}

/** Somewhat compressible payloads (like msgpack records with repeated keys). */
function payload(i: number, bytes: number): Uint8Array {
  const text = `{"url":"http://host${i % 97}.example/page/${i}","status":200,"links":[`.padEnd(bytes, 'x,"rel":"nofollow"');
  return new TextEncoder().encode(text.slice(0, bytes));
}

async function measure(broker: Broker, p: Params): Promise<Record<string, unknown>> {
  const t = topic('links', partitionId(Date.now() % 1_000_000_000));
  const wire = [batching({ maxMessages: p.batch, maxDelayMs: 5 }), compression({ codec: p.codec })];
  const subscribe = async () => composeConsumer(await broker.subscribe(t, { subscription: 'bench', type: 'exclusive', receiverQueueSize: 1000 }), ...wire);
  // Create the subscription, then leave it: consumption is timed on a backlog, not overlapped with producing.
  await (await subscribe()).close();
  const producer = composeProducer(await broker.producer(t, { producer: producerId('bench') }), ...wire);
  const t0 = performance.now();
  const inFlight = new Set<Promise<void>>();
  for (let i = 0; i < p.messages; i++) {
    const s = producer.send(payload(i, p.bytes));
    inFlight.add(s);
    void s.finally(() => inFlight.delete(s));
    if (inFlight.size >= p.window) await Promise.race(inFlight);
  }
  await producer.flush();
  const produced = p.messages / ((performance.now() - t0) / 1000);
  const c0 = performance.now();
  const consumer = await subscribe();
  let got = 0;
  const deadline = Date.now() + 120_000;
  while (got < p.messages && Date.now() < deadline) {
    const ms = await consumer.receive(1000, 1000);
    await Promise.all(ms.map((m) => consumer.ack(m)));
    got += ms.length;
  }
  const consumed = got / ((performance.now() - c0) / 1000);
  await producer.close();
  await consumer.close();
  if (got < p.messages) throw new Error(`consumed ${got} of ${p.messages} messages within 120 s`);
  return { produced_per_s: Math.round(produced), consumed_per_s: Math.round(consumed), consumed: got };
}

/** A bare `ws` producer loop on the same Pulsar: JSON frames, `window` receipts outstanding. */
async function rawWsProducer(wsBase: string, tenant: string, p: Params): Promise<number> {
  const url = `${wsBase}/ws/v2/producer/persistent/${tenant}/links/raw-${Date.now()}?batchingEnabled=false`;
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  let acked = 0;
  let sent = 0;
  const t0 = performance.now();
  await new Promise<void>((resolve, reject) => {
    const pump = (): void => {
      while (sent < p.messages && sent - acked < p.window) {
        ws.send(JSON.stringify({ payload: Buffer.from(payload(sent, p.bytes)).toString('base64'), context: String(sent) }));
        sent++;
      }
    };
    ws.on('message', (d) => {
      const r = JSON.parse(String(d)) as { result: string };
      if (r.result !== 'ok') reject(new Error(`raw send failed: ${String(d)}`));
      if (++acked === p.messages) resolve();
      else pump();
    });
    pump();
  });
  const rate = p.messages / ((performance.now() - t0) / 1000);
  ws.close();
  return Math.round(rate);
}

// `tsx bench/broker.ts [args]` prints the same one JSON line the bench runner would.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  console.log(JSON.stringify({ name: 'broker', ...(await run(process.argv.slice(2))) }));
}
