import assert from 'node:assert/strict';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { MemoryBroker, openExternalProducer, stageCheckpointKey, startWorker, type Worker, type WorkerEvent } from '../src/index.js';
import { openCheckpointStore } from '../src/storage/index.js';
import { REDIS_URL, clusterClickTopology, deleteKeys, skipWithoutRedis } from './kit/cluster.js';
import { tempDir } from './kit/datasets.js';
import { until } from './kit/clusterRun.js';
import { S3_BUCKET, s3Env, skipWithoutS3 } from './kit/s3.js';

/**
 * An S3 outage, end to end: the workers reach the S3 server through a TCP relay that the test
 * takes down (refusing connections and cutting the open ones) and brings back. While it is
 * down, a running partition's checkpoints fail and `cluster status` says so (found by a new
 * user: partitions showed `running` while their acks waited), and a worker that starts then
 * joins, its partitions waiting for the store (found by a new user: a 10 s outage during
 * restores left partitions refused for good); once it is back, all run and the counts are exact.
 */
class Relay {
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();
  constructor(readonly port: number, readonly target: URL) {}

  async up(): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(Number(this.target.port), this.target.hostname);
      for (const s of [client, upstream]) {
        this.#sockets.add(s);
        s.on('close', () => this.#sockets.delete(s));
        s.on('error', () => {});
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(this.port, '127.0.0.1', () => resolve()));
    this.#server = server;
  }

  async down(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const s of this.#sockets) s.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

test('an S3 outage: running partitions report failing checkpoints, a worker started meanwhile waits; once it is back all run and the counts are exact', async (t) => {
  if (await skipWithoutRedis(t)) return;
  if (await skipWithoutS3(t)) return;
  const env = s3Env();
  const relay = new Relay(await freePort(), new URL(env.AWS_ENDPOINT_URL!));
  await relay.up();
  const dir = tempDir('sf-s3-outage-');
  const clusterName = `s3-outage-${process.pid}`;
  const keyPrefix = `sfc-test-${process.pid}-s3-outage:`;
  const relayed = { ...env, AWS_ENDPOINT_URL: `http://127.0.0.1:${relay.port}` };
  const prefix = `test-outage-${process.pid}`;
  const broker = new MemoryBroker();
  const { topology, clicks } = clusterClickTopology();
  const producer = await openExternalProducer({ broker, dataDir: dir.dir, namespace: clicks, name: 'clicks-src' });
  const truth = new Map<string, number>();
  let sent = 0;
  const send = async (n: number) => {
    for (let i = 0; i < n; i++, sent++) {
      const host = `site-${sent % 13}.example`;
      await producer.send({ host, n: sent });
      truth.set(host, (truth.get(host) ?? 0) + 1);
    }
  };
  const workers: Worker[] = [];
  const start = async (name: string, events: WorkerEvent[]) => {
    const w = await startWorker({
      cluster: REDIS_URL, clusterName, keyPrefix, topology, broker, dataDir: join(dir.dir, name), leaseMs: 1000, name,
      checkpoints: openCheckpointStore(`s3://${S3_BUCKET}/${prefix}`, { env: relayed, s3: { maxAttempts: 2, timeoutMs: 1000 } }),
      checkpointIntervalMs: 100, onEvent: (e) => events.push(e), logger: { debug() {}, warn() {}, error() {} },
    });
    workers.push(w);
    return w;
  };
  const totals = async (w: Worker) => {
    const sums = new Map<string, number>();
    for (let p = 0; p < 2; p++) for (const [h, c] of (await w.host.ask('totals', p, 'hosts')) as Array<[string, number]>) sums.set(h, (sums.get(h) ?? 0) + c);
    return String([...sums].sort());
  };
  const exact = () => String([...truth].sort());
  try {
    const eventsA: WorkerEvent[] = [];
    const a = await start('a', eventsA);
    await until('all 8 units running on a', async () => eventsA.filter((e) => e.type === 'started').length >= 8);
    await send(100);
    await until('exact on a', async () => (await totals(a)) === exact());

    await relay.down();
    await send(100);
    const failing = await until('the status to show failing checkpoints', async () => {
      const s = await a.clusterStatus();
      return s.partitions.find((p) => p.state === 'running' && /its checkpoints fail for \d+ s: S3 .*no answer.*its acks and outputs wait/.test(p.reason ?? ''));
    }, 30_000);
    assert.equal(failing.state, 'running');
    assert.notEqual(await totals(a), exact(), 'the second batch\'s totals wait: count publishes its deltas only with a checkpoint');
    await a.stop(); // its hand-back checkpoints fail too: the next owner takes the last durable ones, the broker replays the rest

    const eventsB: WorkerEvent[] = [];
    const b = await start('b', eventsB);
    const waiting = await until('a unit waiting for the store', async () => eventsB.find((e) => e.type === 'waiting'));
    assert.match((waiting as { reason: string }).reason, /waiting for the checkpoint store, the broker or the cluster's redis to answer: S3 .*no answer/);
    await until('the status to show the wait (the next heartbeat publishes the report)', async () =>
      (await b.clusterStatus()).partitions.some((p) => p.state === 'opening' && /^waiting for the checkpoint store, the broker or the cluster's redis to answer: S3/.test(p.reason ?? '')));
    assert.ok(!eventsB.some((e) => e.type === 'failed'), 'nothing refused while the store does not answer');

    await relay.up();
    await until('all 8 units running on b once the store answers', async () => eventsB.filter((e) => e.type === 'started').length >= 8, 60_000);
    await send(50);
    await until('exact on b', async () => (await totals(b)) === exact(), 60_000);
    await until('no failing checkpoints in the status', async () => (await b.clusterStatus()).partitions.every((p) => p.state === 'running' && p.reason === undefined));
  } finally {
    await relay.up().catch(() => undefined);
    for (const w of workers) await w.stop().catch(() => undefined);
    await producer.close();
    await broker.close();
    await deleteKeys(keyPrefix);
    const store = openCheckpointStore(`s3://${S3_BUCKET}/${prefix}`, { env });
    for (const [stage, n] of [['count', 6], ['totals', 2]] as const) for (let p = 0; p < n; p++) await store.remove(stageCheckpointKey(clusterName, stage, p));
    await store.close();
    await relay.down();
    dir.cleanup();
  }
});
