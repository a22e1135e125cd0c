// The click-counter stage on worker processes (docs/cluster.md, "Figures"): what bench/cluster.ts
// measured before it measured the web index.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  clusterStatus, connectBroker, openExternalProducer, partitionId,
  type Broker, type ClusterStatus, type Logger,
} from '../src/index.js';
import { benchOptions } from './lib/options.js';
import { PARTITIONS, hits, topology } from './lib/clusterCounter.js';
import { REDIS, benchScope as scope, redisUnreachable, sleep, until } from './lib/clusterScope.js';
import type { BenchScope } from './lib/clusterScope.js';

/**
 * The smoke run's hang bound in test/bench.smoke.test.ts, ms: the smoke run counts clicks in
 * process, then on worker processes and through a failover (each worker process loads the
 * sources): 41 s alone on a slow 2-core machine, where `bench cluster`'s 60 s went past the
 * default 90 s bound with the unit tests running beside it.
 */
export const smokeHangMs = 300_000;

/** Top-level fields of the result line besides bench/run.mjs's (checked by test/bench.smoke.test.ts). */
export const resultFields = ['smoke', 'params', 'inProcess', 'workers', 'failover'] as const;

const root = fileURLToPath(new URL('..', import.meta.url));
const quietLogger: Logger = { debug() {}, warn() {}, error: (f, m) => process.stderr.write(`error: ${m ?? ''} ${JSON.stringify(f)}\n`) };

/** Sends `n` messages over 5,000 hosts (skewed), 64 sends in flight; not timed. */
async function preload(broker: Broker, dataDir: string, n: number): Promise<void> {
  const producer = await openExternalProducer({ broker, dataDir, namespace: hits, name: 'bench-src' });
  for (let i = 0; i < n; i += 64) {
    const chunk = [];
    for (let k = i; k < Math.min(n, i + 64); k++) chunk.push(producer.send({ host: `h${Math.floor(5000 * ((k * 0.6180339887) % 1) ** 2)}`, n: k }));
    await Promise.all(chunk);
  }
  await producer.close();
}

/** Sum of the stage's backlogs over the 16 partitions (undefined while a subscription does not exist yet). */
async function backlog(broker: Broker): Promise<number | undefined> {
  let sum = 0;
  for (let p = 0; p < PARTITIONS; p++) {
    const b = await broker.subscriptionBacklog!({ namespace: hits.name, partition: partitionId(p) }, 'count');
    if (b === undefined) return undefined;
    sum += b;
  }
  return sum;
}

/** A `shardflow worker` process (bin/shardflow.mjs, with its shebang's allocator settings). */
function worker(s: BenchScope, name: string, leaseMs: number): { child: ChildProcess; exited: Promise<number | null> } {
  const child = spawn(join(root, 'bin/shardflow.mjs'), [
    'worker', '--topology', join(root, 'bench/lib/clusterCounter.ts'), '--cluster', REDIS, '--cluster-name', s.clusterName,
    '--broker', REDIS, '--data-dir', s.dataDir, '--name', name, '--lease-ms', String(leaseMs),
  ], { stdio: ['ignore', 'ignore', 'inherit'] });
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return { child, exited };
}

/**
 * The rate from the moment every partition runs (`t0`, after the stores opened and the
 * subscriptions exist) to a backlog of 0: what was still unconsumed at `t0` over the time it
 * took. What the partitions consumed while starting is not counted either way.
 */
async function drainRate(broker: Broker): Promise<{ messages: number; seconds: number; msgsPerSec: number }> {
  const left = await until('the subscriptions to exist', () => backlog(broker));
  const t0 = Date.now();
  // Nothing left to time: the partitions drained the preload while starting (a fast machine,
  // or the smoke mode's few messages). The rate is unknown, not zero: say so.
  if (left === 0) return { messages: 0, seconds: 0, msgsPerSec: Number.NaN };
  await until('a backlog of 0', async () => ((await backlog(broker)) === 0 ? true : undefined));
  const seconds = (Date.now() - t0) / 1000;
  return { messages: left, seconds, msgsPerSec: Math.round(left / seconds) };
}

/** Messages/s of one process running every partition (`Topology.start`) over Redis Streams, preloaded (see `drainRate`). */
async function inProcess(messages: number): Promise<{ messages: number; seconds: number; msgsPerSec: number }> {
  const s = scope('one');
  const broker = await connectBroker(s.identity);
  try {
    await preload(broker, s.dataDir, messages);
    const running = await topology.start({ broker, dataDir: s.dataDir, logger: quietLogger });
    const r = await drainRate(broker);
    await running.stop();
    return r;
  } finally {
    await broker.close();
    await s.dispose();
  }
}

/** Messages/s of `n` worker processes, preloaded, from every partition running to a backlog of 0 (see `drainRate`). */
async function workers(n: number, messages: number, leaseMs: number): Promise<{ workers: number; messages: number; seconds: number; msgsPerSec: number }> {
  const s = scope(`w${n}`);
  const broker = await connectBroker(s.identity);
  const procs: Array<ReturnType<typeof worker>> = [];
  try {
    await preload(broker, s.dataDir, messages);
    for (let i = 1; i <= n; i++) procs.push(worker(s, `w${i}`, leaseMs));
    await allRunning(s.clusterName, n);
    return { workers: n, ...(await drainRate(broker)) };
  } finally {
    await stopAll(procs);
    await broker.close();
    await s.dispose();
  }
}

/** Resolves with the status once `n` workers are live and every partition runs. */
function allRunning(clusterName: string, n: number, broker?: Broker): Promise<ClusterStatus> {
  return until('every partition running', async () => {
    const st = await clusterStatus({ cluster: REDIS, clusterName, ...(broker ? { broker } : {}) });
    return st.workers.length === n && st.partitions.length === PARTITIONS && st.partitions.every((p) => p.state === 'running') ? st : undefined;
  });
}

async function stopAll(procs: ReadonlyArray<ReturnType<typeof worker>>): Promise<void> {
  for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGTERM');
  await Promise.all(procs.map((p) => p.exited));
}

/**
 * Failover: `n` workers consume a stream of messages sent while it runs; one worker (not the
 * leader) is SIGKILLed halfway; measured from the kill to every partition running again on a
 * live worker (`ownedAgainS`), and to a backlog of 0 everywhere after the last send
 * (`quietS`, from the kill).
 */
async function failover(n: number, messages: number, leaseMs: number) {
  const s = scope('failover');
  const broker = await connectBroker(s.identity);
  const procs: Array<ReturnType<typeof worker>> = [];
  const status = (): Promise<ClusterStatus> => clusterStatus({ cluster: REDIS, clusterName: s.clusterName, broker });
  try {
    for (let i = 1; i <= n; i++) procs.push(worker(s, `w${i}`, leaseMs));
    const up = await allRunning(s.clusterName, n);
    const victim = up.workers.find((w) => w.id !== up.leader?.worker)!;
    const proc = procs.find((p) => p.child.pid === victim.pid)!;
    const killedPartitions = up.partitions.filter((p) => p.owner === victim.id).length;
    const sending = preload(broker, s.dataDir, messages);
    await sleep(500);
    const killedAt = Date.now();
    proc.child.kill('SIGKILL');
    await until('its partitions to run again on the others', async () => {
      const st = await status();
      return st.partitions.every((p) => p.state === 'running' && p.owner !== victim.id && st.workers.some((w) => w.id === p.owner)) ? true : undefined;
    });
    const ownedAgainS = (Date.now() - killedAt) / 1000;
    await sending;
    await until('a backlog of 0', async () => ((await backlog(broker)) === 0 ? true : undefined));
    const quietS = (Date.now() - killedAt) / 1000;
    return { workers: n, leaseMs, killedPartitions, ownedAgainS, quietS };
  } finally {
    await stopAll(procs);
    await broker.close();
    await s.dispose();
  }
}

/**
 * `npm run -s bench -- cluster-counter --json`: cluster mode's figures for a framework topology
 * (docs/cluster.md, "Figures"), on this machine, over Redis Streams
 * (coordination and broker in the Redis at SHARDFLOW_REDIS_URL, default 127.0.0.1:6379):
 *
 * - `inProcess`: one process runs the 16 partitions of bench/lib/clusterCounter.ts
 *   (`Topology.start`); `workers`: 1, 2 and 4 `shardflow worker` processes run them. Each run
 *   gets `--messages` messages preloaded into the stream (not timed) and is timed from the
 *   moment every partition runs to every backlog 0 (polled every 100 ms): the messages still
 *   unconsumed at that moment per second (`drainRate`; `null` in the JSON line, with
 *   `overInProcess` null, when the partitions drained everything while starting: give more
 *   `--messages`).
 * - `failover`: `--failover-workers` workers (lease `--lease-ms`), one SIGKILLed while
 *   `--failover-messages` are sent: seconds to every partition owned and running again, and to
 *   a backlog of 0.
 *
 * Args: `--messages` (default 100,000; smoke 5,000), `--workers` list (default `1,2,4`; smoke
 * `1,2`), `--lease-ms` (default 3000), `--failover-workers` (default 3; smoke 2),
 * `--failover-messages` (default 20,000; smoke 1,000). Redis unreachable: `skipped` (fails
 * under SHARDFLOW_REQUIRE_BROKERS=1).
 */
export async function run(args: string[]): Promise<Record<string, unknown>> {
  const o = benchOptions(args);
  const messages = o.number('--messages', 100_000, 5_000);
  const counts = o.string('--workers', '1,2,4', '1,2').split(',').map(Number);
  if (counts.some((n) => !Number.isInteger(n) || n < 1 || n > 16)) throw new RangeError(`--workers needs a list of integers from 1 to 16, got ${o.string('--workers', '')}`);
  const leaseMs = o.number('--lease-ms', 3000);
  const failoverWorkers = o.number('--failover-workers', 3, 2);
  const failoverMessages = o.number('--failover-messages', 20_000, 1_000);
  const params = { messages, partitions: PARTITIONS, workers: counts, leaseMs, failoverWorkers, failoverMessages, broker: 'redis-streams' };
  const unreachable = await redisUnreachable();
  if (unreachable !== undefined) {
    const skipped = { skipped: unreachable };
    return { smoke: o.smoke, params, inProcess: skipped, workers: skipped, failover: skipped };
  }
  const one = await inProcess(messages);
  process.stderr.write(`in process: ${JSON.stringify(one)}\n`);
  const byWorkers = [];
  for (const n of counts) {
    const r = await workers(n, messages, leaseMs);
    process.stderr.write(`${n} workers: ${JSON.stringify(r)}\n`);
    const ratio = r.msgsPerSec / one.msgsPerSec;
    byWorkers.push({ ...r, overInProcess: Number.isFinite(ratio) ? Number(ratio.toFixed(3)) : null });
  }
  const f = await failover(failoverWorkers, failoverMessages, leaseMs);
  return { smoke: o.smoke, params, inProcess: one, workers: byWorkers, failover: f };
}
