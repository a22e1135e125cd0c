// One cluster worker process for the cluster tests: runs the two-stage click counter
// (test/kit/cluster.ts) over Redis Streams, prints each WorkerEvent as one JSON line on stdout,
// hands its partitions back on SIGTERM and exits 0.
// Usage: node --import tsx test/kit/clusterWorker.ts <redis url> <cluster name> <key prefix> <broker prefix> <data dir> <name> <lease ms> [<checkpoints url> <checkpoint interval ms> [<standby replicas>]]
import { RedisStreamsBroker, startWorker, type Logger } from '../../src/index.js';
import { clusterClickTopology } from './cluster.js';

const [url, clusterName, keyPrefix, brokerPrefix, dataDir, name, leaseMs, checkpoints, checkpointIntervalMs, standbys] = process.argv.slice(2) as [string, string, string, string, string, string, string, string?, string?, string?];
const line = (o: object) => process.stdout.write(`${JSON.stringify({ ...o, at: Date.now() })}\n`);
const logger: Logger = {
  debug() {},
  warn: (fields, message) => process.stderr.write(`warn: ${message} ${String((fields as { err?: unknown }).err ?? '')}\n`),
  error: (fields, message) => process.stderr.write(`error: ${message} ${String((fields as { err?: unknown }).err ?? '')}\n`),
};
const { topology } = clusterClickTopology();
const broker = await RedisStreamsBroker.connect({ url, prefix: brokerPrefix, heartbeatMs: 200, deadAfterMs: 2000, blockMs: 100 });
const worker = await startWorker({ cluster: url, clusterName, keyPrefix, topology, broker, dataDir, name, leaseMs: Number(leaseMs), logger,
  ...(checkpoints ? { checkpoints, checkpointIntervalMs: Number(checkpointIntervalMs) } : {}), ...(standbys ? { standbyReplicas: Number(standbys) } : {}), onEvent: (event) => line({ event }) });
let stopping = false;
process.on('SIGTERM', () => {
  if (stopping) return;
  stopping = true;
  void worker.stop().then(async () => {
    await broker.close();
    line({ exit: 0 });
    process.exit(0);
  });
});
worker.closed.catch(async (err: unknown) => {
  process.stderr.write(`worker failed: ${String(err)}\n`);
  await broker.close();
  process.exit(1);
});
