import { execSync } from 'node:child_process';
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
import { Namespaces, topic } from '../src/runtime/topics.js';

/**
 * Broker throughput: messages/s produced and consumed through batching + compression, per
 * broker; consumption is timed on the full backlog after producing (subscribe, receive,
 * ack), per
 * broker (memory always; Redis and Pulsar when reachable). For Pulsar also a raw `ws`
 * producer loop against the same broker in the same run, and our producer's ratio to it.
 *
 * Args: `--messages N` (20000), `--bytes B` payload size (256), `--batch N` (100),
 * `--codec lz4|none` (lz4), `--window N` sends in flight (2000), `--brokers memory,redis,pulsar`.
 * @returns one object per broker: name, params, produced_per_s, consumed_per_s, rss_mb,
 *   commit (and raw_ws_per_s, ratio_to_raw for Pulsar); `skipped` with the reason otherwise.
 */
export async function run(args: string[]): Promise<Record<string, unknown>[]> {
  const opt = (name: string, dflt: string): string => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 && args[i + 1] !== undefined ? args[i + 1]! : dflt;
  };
  const params = {
    messages: Number(opt('messages', '20000')),
    bytes: Number(opt('bytes', '256')),
    batch: Number(opt('batch', '100')),
    codec: opt('codec', 'lz4') as CompressionCodec,
    window: Number(opt('window', '2000')),
  };
  const brokers = opt('brokers', 'memory,redis,pulsar').split(',');
  const commit = gitCommit();
  const out: Record<string, unknown>[] = [];
  const connectors: Record<string, () => Promise<Broker>> = {
    memory: async () => new MemoryBroker(),
    redis: () => RedisStreamsBroker.connect({ prefix: `sfbench-${process.pid}:`, connectTimeoutMs: 2000 }),
    pulsar: () => PulsarBroker.connect({ tenant: 'shardflow-bench', connectTimeoutMs: 5000 }),
  };
  for (const name of brokers) {
    const connect = connectors[name];
    if (!connect) throw new RangeError(`unknown broker ${name}`);
    let broker: Broker;
    try {
      broker = await connect();
    } catch (err) {
      out.push({ name: `broker.${name}`, params, skipped: (err as Error).message, commit });
      continue;
    }
    try {
      const result: Record<string, unknown> = { name: `broker.${name}`, params, ...(await measure(broker, params)), commit };
      if (name === 'pulsar') {
        const raw = await rawWsProducer(params);
        result.raw_ws_per_s = raw;
        result.ratio_to_raw = Number(((result.produced_per_s as number) / raw).toFixed(3));
      }
      result.rss_mb = Math.round(process.memoryUsage().rss / 2 ** 20);
      out.push(result);
    } finally {
      await broker.close();
    }
  }
  return out;
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
  const t = topic(Namespaces.links, partitionId(Date.now() % 1_000_000_000));
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
  return { produced_per_s: Math.round(produced), consumed_per_s: Math.round(consumed), consumed: got };
}

/** A bare `ws` producer loop on the same Pulsar: JSON frames, `window` receipts outstanding. */
async function rawWsProducer(p: Params): Promise<number> {
  const url = `ws://127.0.0.1:8080/ws/v2/producer/persistent/shardflow-bench/links/raw-${Date.now()}?batchingEnabled=false`;
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

function gitCommit(): string {
  try {
    return execSync('git rev-parse --short HEAD', { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'unknown'; // not a git checkout: the commit is unknown, nothing else depends on it
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  for (const r of await run(process.argv.slice(2))) console.log(JSON.stringify(r));
}
