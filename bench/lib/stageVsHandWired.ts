import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { concatMap, lastValueFrom, take, scan, filter } from 'rxjs';
import {
  MemoryBroker, Topology, decodeInt64, defineNamespace, encodeInt64, int64Add, msgpackCodec, producerId, type Logger,
} from '../../src/index.js';
import { batchMessages } from '../../src/operators/batchMessages.js';
import { Store } from '../../src/storage/index.js';

interface Click { readonly host: string; readonly n: number }
const isClick = (v: unknown): v is Click => typeof v === 'object' && v !== null && typeof (v as Click).host === 'string';
const quiet: Logger = { debug() {}, warn() {}, error: (f, m) => console.error(`error: ${m ?? ''}`, f) };
const HOSTS = Array.from({ length: 64 }, (_, i) => `site-${i}.example`);
const BATCH = { maxCount: 256, maxDelayMs: 5 } as const;

/**
 * Messages/s through ONE exactly-once stream stage (memory broker, one partition, a RocksDB
 * write batch and an ack per batch of <= 256 messages): producer sends of `messages` clicks
 * (msgpack) until the running topology is quiescent. Each message merges int64 +1 into its
 * host's count. A fresh data dir per call, removed after.
 */
export async function stageRate(messages: number): Promise<number> {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-stage-'));
  const clicks = defineNamespace('clicks', { codec: msgpackCodec('Click', isClick), partitions: 1, key: (c: Click) => c.host });
  const one = encodeInt64(1); // as on the hand-wired side: the operand is copied into the write batch
  const topology = Topology.create('bench-stage').stage('count', {
    input: clicks,
    columnFamilies: { clicks: { mergeOperator: int64Add() } },
    batching: BATCH,
    onMessage(ctx, click) {
      ctx.writes.merge('clicks', click.host, one);
    },
    query: (reads, _request: 'total') => totalCount(HOSTS.map((h) => reads.get('clicks', h))),
  });
  const broker = new MemoryBroker();
  const running = await topology.start({ broker, dataDir, logger: quiet });
  try {
    const producer = await running.producer(clicks, 'bench-source');
    const t0 = performance.now();
    for (let i = 0; i < messages; i++) await producer.send({ host: HOSTS[i % HOSTS.length]!, n: i });
    await running.quiescence({ pollMs: 2, timeoutMs: 600_000 });
    const rate = messages / ((performance.now() - t0) / 1000);
    checkCount('stage', await running.ask('count', 0, 'total'), messages);
    return rate;
  } finally {
    await running.stop();
    await broker.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/**
 * The same work wired by hand: a raw MemoryBroker consumer (one topic, exclusive
 * subscription), `batchMessages` (256 / 5 ms), per batch: decode, one int64 +1 merge per
 * message plus the applied mark put (producer -> last sequence) in one RocksDB write batch,
 * commit, then ack each message. No dedup check, supervision, outbox or flow counters.
 */
export async function handWiredRate(messages: number): Promise<number> {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-hand-'));
  const codec = msgpackCodec('Click', isClick);
  const broker = new MemoryBroker();
  const store = await Store.open({ path: dataDir, columnFamilies: { clicks: { mergeOperator: int64Add() }, applied: {} } });
  try {
    const topic = defineNamespace('clicks', { codec, partitions: 1, key: (c: Click) => c.host }).topicOf({ host: 'x', n: 0 });
    const consumer = await broker.subscribe(topic, { subscription: 'hand', type: 'exclusive' });
    const producer = await broker.producer(topic, { producer: producerId('bench-hand') });
    const one = encodeInt64(1);
    const seqBytes = new Uint8Array(8);
    const done = lastValueFrom(
      consumer.messages$.pipe(
        batchMessages(BATCH),
        concatMap(async (batch) => {
          const wb = store.batch();
          for (const m of batch) wb.merge('clicks', codec.decode(m.payload).host, one);
          const last = batch[batch.length - 1]!;
          new DataView(seqBytes.buffer).setBigUint64(0, BigInt(last.sequence));
          wb.put('applied', String(last.producer), seqBytes);
          await store.write(wb);
          for (const m of batch) await consumer.ack(m);
          return batch.length;
        }),
        scan((a, n) => a + n, 0),
        filter((n) => n >= messages),
        take(1),
      ),
    );
    const t0 = performance.now();
    for (let i = 0; i < messages; i++) {
      const c = { host: HOSTS[i % HOSTS.length]!, n: i };
      await producer.send(codec.encode(c), { key: c.host });
    }
    await done;
    const rate = messages / ((performance.now() - t0) / 1000);
    checkCount('hand-wired', await totalCount(HOSTS.map((h) => store.get('clicks', h))), messages);
    await producer.close();
    await consumer.close();
    return rate;
  } finally {
    await store.close();
    await broker.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Sum of the stored int64 counts (a missing key counts 0). */
async function totalCount(values: ReadonlyArray<Promise<Uint8Array | undefined>>): Promise<number> {
  let total = 0;
  for (const v of await Promise.all(values)) if (v) total += Number(decodeInt64(v));
  return total;
}

/**
 * Both sides must have stored every message exactly once: a rate of work not done is no rate.
 * @throws Error when the stored counts do not sum to `messages`
 */
function checkCount(side: string, total: number, messages: number): void {
  if (total !== messages) throw new Error(`${side}: stored counts sum to ${total}, not the ${messages} messages sent`);
}
