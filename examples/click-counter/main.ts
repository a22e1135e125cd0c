// A per-host click counter on shardflow: 8 partitions keyed by host, each counting its hosts'
// clicks with an int64 add merge and a record merge, exactly once, on any broker.
// Run: npm run example -- click-counter [--broker redis://127.0.0.1:6379] [--chaos 0.05] [--data-dir DIR]
//      npm run example -- click-counter --workers 3 [--broker redis://…|pulsar://…] [--cluster redis://…]
//      (cluster mode, cluster.ts: three `shardflow worker` processes, this process the producer)
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ChaosPolicy, connectBroker, deleteBrokerScope, freshBrokerIdentity, seededRandom, type Logger, type TopologyProducer } from 'shardflow';
import { runOnCluster } from './cluster.js';
import { topology, clicks, type Click, type HostStats } from './topology.js';

const { values: args } = parseArgs({
  options: {
    broker: { type: 'string' }, chaos: { type: 'string' }, 'data-dir': { type: 'string' }, events: { type: 'string', default: '5000' },
    workers: { type: 'string' }, cluster: { type: 'string' },
  },
});
const dataDir = args['data-dir'] ?? mkdtempSync(join(tmpdir(), 'click-counter-'));
const events = Number(args.events);
const workers = args.workers === undefined ? undefined : Number(args.workers);
if (workers !== undefined && !(Number.isInteger(workers) && workers >= 1 && workers <= 16)) throw new RangeError(`--workers must be an integer from 1 to 16, got ${args.workers}`);
if (workers !== undefined && args.chaos) throw new RangeError('--chaos runs in one process only (the workers take no fault policy)');
// A cluster needs a broker that crosses processes; Redis coordinates it either way.
const brokerSpec = args.broker ?? (workers !== undefined ? 'redis://127.0.0.1:6379' : 'memory');

// The ground truth, computed without shardflow: a Map, carried over runs in the data dir.
const truthFile = join(dataDir, 'expected.json');
const truth = new Map<string, number>(Object.entries(JSON.parse(readFileSync(truthFile, { flag: 'a+' }).toString() || '{}')));
/** Sends `events` skewed clicks (a few hosts get most), counting them in `truth`. */
async function sendClicks(producer: TopologyProducer<Click>): Promise<void> {
  const random = seededRandom(producer.epoch);
  const hosts = Array.from({ length: 40 }, (_, i) => `site-${i}.example`);
  for (let i = 0; i < events; i++) {
    const host = hosts[Math.floor(hosts.length * random() ** 2)]!;
    await producer.send({ host, path: `/page/${i % 97}`, ms: 1_700_000_000_000 + i });
    truth.set(host, (truth.get(host) ?? 0) + 1);
  }
}

type Counted = { host: string; clicks: bigint; stats: HostStats };
let result: { counted: Counted[]; deadLetters: number; restarts: string; epoch: number };
console.log(topology.describe());
if (workers !== undefined) {
  result = await runOnCluster({ workers, broker: brokerSpec, cluster: args.cluster ?? (brokerSpec.startsWith('redis://') ? brokerSpec : 'redis://127.0.0.1:6379'), dataDir, send: sendClicks });
} else {
  const quiet: Logger = { debug() {}, warn() {}, error: (f, m) => console.error(`error: ${m ?? ''}`, f) };
  const identity = freshBrokerIdentity(brokerSpec);
  const broker = await connectBroker(identity);
  const chaos = args.chaos ? ChaosPolicy.parse(args.chaos) : undefined;
  const running = await topology.start({ broker, dataDir, logger: quiet, ...(chaos ? { chaos } : {}) });
  let restarts = 0; // partitions restarted by their supervisor (each --chaos fault is one)
  running.system.events$.subscribe((e) => void (e.type === '@shardflow.restarted' && restarts++));
  const producer = await running.producer(clicks, 'click-source');
  await sendClicks(producer);
  await running.quiescence({ timeoutMs: 300_000 });
  const counted = (await running.askAll('count', 'hosts')).flat();
  const deadLetters = (await running.deadLetters('count')).length;
  await running.stop();
  await broker.close();
  await deleteBrokerScope(identity);
  result = { counted, deadLetters, restarts: String(restarts), epoch: producer.epoch };
}

const { counted, deadLetters } = result;
const byHost = new Map(counted.map((h) => [h.host, h]));
const problems = [...new Set([...truth.keys(), ...byHost.keys()])].filter((host) => {
  const h = byHost.get(host);
  return BigInt(truth.get(host) ?? 0) !== h?.clicks || h.stats.clicks !== truth.get(host);
});
const total = counted.reduce((a, h) => a + h.clicks, 0n);
const how = workers !== undefined ? ` to ${workers} worker processes` : '';
console.log(`\nproducer click-source epoch ${result.epoch}: sent ${events} clicks over ${brokerSpec}${how}${args.chaos ? `, chaos ${ChaosPolicy.parse(args.chaos).rate}` : ''}; data dir ${dataDir}`);
console.log(`counted ${total} clicks (all runs) on ${counted.length} hosts; partition restarts: ${result.restarts}; dead letters: ${deadLetters}`);
for (const h of counted.sort((a, b) => Number(b.clicks - a.clicks)).slice(0, 5)) {
  console.log(`  ${h.host.padEnd(18)} ${String(h.clicks).padStart(6)}  first ${h.stats.firstMs} last ${h.stats.lastMs}`);
}
if (problems.length > 0 || deadLetters > 0) {
  console.log(`MISMATCH with the ground truth on ${problems.length} hosts: ${problems.slice(0, 5).join(', ')}`);
  process.exit(1);
}
writeFileSync(truthFile, JSON.stringify(Object.fromEntries(truth)));
console.log(`check: equal to the ground truth computed without shardflow (${truth.size} hosts)`);
if (!args['data-dir']) rmSync(dataDir, { recursive: true, force: true });
