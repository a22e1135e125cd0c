// Cluster mode of the click counter (`--workers N`): N `shardflow worker` processes run the
// topology of topology.ts, coordinated through Redis; this process is only the producer
// (a client), then reads the counts by joining the cluster alone once the workers handed
// their partitions back. Redis must run for the coordination (scripts/redis/start.sh).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  clusterBrokerIdentity, clusterStatus, connectBroker, connectClusterClient, deleteBrokerScope, openExternalProducer, partitionId, retireCluster, startWorker,
  type Broker, type ClusterStatus, type Logger, type TopologyProducer,
} from 'shardflow';
import { clicks, topology, type Click, type HostStats } from './topology.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const LEASE_MS = 3000;

/** Polls `probe` every 200 ms until it gives a value; throws naming `what` after `timeoutMs`. */
async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 120_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Runs `send` against a cluster of `workers` processes and returns the counts as one process would. */
export async function runOnCluster(o: { workers: number; broker: string; cluster: string; dataDir: string; send: (p: TopologyProducer<Click>) => Promise<void> }) {
  if (o.broker === 'memory') throw new RangeError('--workers needs a broker that crosses processes: --broker redis://… or pulsar://…');
  const clusterName = `click-counter-${randomUUID().slice(0, 8)}`;
  const identity = clusterBrokerIdentity(o.broker, clusterName);
  const children: ChildProcess[] = [];
  const exits: Array<Promise<number | null>> = [];
  for (let i = 1; i <= o.workers; i++) {
    const child = spawn(process.execPath, [
      '--conditions=shardflow-source', join(root, 'bin/shardflow.mjs'), 'worker', '--topology', join(root, 'examples/click-counter/topology.ts'),
      '--cluster', o.cluster, '--cluster-name', clusterName, '--broker', o.broker, '--data-dir', o.dataDir, '--name', `w${i}`, '--lease-ms', String(LEASE_MS), '--json',
    ], { stdio: ['ignore', 'ignore', 'inherit'] });
    children.push(child);
    exits.push(new Promise((r) => child.on('exit', (code) => r(code))));
  }
  const broker: Broker = await connectBroker(identity);
  const status = (): Promise<ClusterStatus> => clusterStatus({ cluster: o.cluster, clusterName, broker });
  try {
    const up = await until(`${o.workers} workers running every partition`, async () => {
      const s = await status();
      return s.workers.length === o.workers && s.partitions.length > 0 && s.partitions.every((p) => p.state === 'running') ? s : undefined;
    });
    console.log(`cluster ${clusterName} (Redis ${o.cluster}): ${up.workers.map((w) => `${w.name} pid ${w.pid} runs ${w.leases} partitions`).join('; ')}`);
    const producer = await openExternalProducer({ broker, dataDir: o.dataDir, namespace: clicks, name: 'click-source' });
    await o.send(producer);
    await producer.close();
    // Quiet: every click the producer sent applied, and everything the partitions sent on, read
    // from their stores (docs/cluster.md, "Quiescence across the cluster").
    const client = await connectClusterClient({ cluster: o.cluster, clusterName, broker });
    try {
      await client.quiescence({ external: producer.sent(), timeoutMs: 120_000 });
    } finally {
      await client.close();
    }
    for (const c of children) c.kill('SIGTERM');
    const codes = await Promise.all(exits);
    if (codes.some((c) => c !== 0)) throw new Error(`a worker exited with ${codes.join(', ')} after SIGTERM (0 expected)`);
    console.log(`the ${o.workers} workers handed their partitions back and exited 0`);

    // Read the counts as one process: this process joins the now empty cluster and asks each partition.
    const quiet: Logger = { debug() {}, warn() {}, error: (f, m) => console.error(`error: ${m ?? ''}`, f) };
    const reader = await startWorker({ cluster: o.cluster, clusterName, topology, broker, dataDir: o.dataDir, name: 'reader', leaseMs: LEASE_MS, logger: quiet });
    try {
      const n = clicks.partitioner.partitions;
      await until('the reader to run every partition', async () => (reader.partitions().length === n ? true : undefined));
      const counted: Array<{ host: string; clicks: bigint; stats: HostStats }> = [];
      let deadLetters = 0;
      for (let p = 0; p < n; p++) {
        // The worker's host asks untyped (any application's): the count stage answers HostCount rows.
        counted.push(...((await reader.host.ask('count', p, 'hosts')) as typeof counted));
        deadLetters += (await broker.deadLetters({ namespace: clicks.name, partition: partitionId(p) }, 'count')).length;
      }
      return { counted, deadLetters, restarts: 'in the workers (shardflow tree --cluster shows them)', epoch: producer.epoch };
    } finally {
      await reader.stop();
    }
  } finally {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await Promise.all(exits);
    await broker.close();
    await deleteBrokerScope(identity);
    await retireCluster({ cluster: o.cluster, clusterName }).catch((err: unknown) => console.error(`could not remove the cluster's Redis keys: ${String(err)}`));
  }
}
