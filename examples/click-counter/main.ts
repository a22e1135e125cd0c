// A per-host click counter on shardflow: 8 partitions keyed by host, each counting its hosts'
// clicks with an int64 add merge and a record merge, exactly once, on any broker.
// Run: npm run example -- click-counter [--broker redis://127.0.0.1:6379] [--chaos 0.05] [--data-dir DIR]
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  ChaosPolicy, Topology, connectBroker, decodeInt64, decodeRecord, defineNamespace, deleteBrokerScope, encodeInt64,
  encodeRecord, freshBrokerIdentity, int64Add, msgpackCodec, record, seededRandom, type Logger,
} from 'shardflow';

interface Click { readonly host: string; readonly path: string; readonly ms: number }
interface HostStats { readonly clicks: number; readonly firstMs: number; readonly lastMs: number }

const isClick = (v: unknown): v is Click =>
  typeof v === 'object' && v !== null && typeof (v as Click).host === 'string' && typeof (v as Click).path === 'string' && Number.isInteger((v as Click).ms);

const clicks = defineNamespace('clicks', { codec: msgpackCodec('Click', isClick), partitions: 8, key: (c: Click) => c.host });

const topology = Topology.create('click-counter').stage('count', {
  input: clicks,
  columnFamilies: {
    clicks: { mergeOperator: int64Add() },
    stats: { mergeOperator: record({ clicks: 'sum', firstMs: 'min', lastMs: 'max' }) },
  },
  onMessage(ctx, click) {
    ctx.writes.merge('clicks', click.host, encodeInt64(1));
    ctx.writes.merge('stats', click.host, encodeRecord({ clicks: 1, firstMs: click.ms, lastMs: click.ms }));
  },
  // Every host of the partition with its int64 count and its record.
  async query(reads, _request: 'hosts') {
    const out: Array<{ host: string; clicks: bigint; stats: HostStats }> = [];
    for await (const [host, count] of reads.iterate('clicks')) {
      out.push({ host: host.toString(), clicks: decodeInt64(count), stats: decodeRecord<HostStats>((await reads.get('stats', host))!) });
    }
    return out;
  },
});

const { values: args } = parseArgs({
  options: { broker: { type: 'string', default: 'memory' }, chaos: { type: 'string' }, 'data-dir': { type: 'string' }, events: { type: 'string', default: '5000' } },
});
const dataDir = args['data-dir'] ?? mkdtempSync(join(tmpdir(), 'click-counter-'));
const events = Number(args.events);
const quiet: Logger = { debug() {}, warn() {}, error: (f, m) => console.error(`error: ${m ?? ''}`, f) };
const identity = freshBrokerIdentity(args.broker);
const broker = await connectBroker(identity);
const chaos = args.chaos ? ChaosPolicy.parse(args.chaos) : undefined;
const running = await topology.start({ broker, dataDir, logger: quiet, ...(chaos ? { chaos } : {}) });
console.log(topology.describe());
let restarts = 0; // partitions restarted by their supervisor (each --chaos fault is one)
running.system.events$.subscribe((e) => void (e.type === '@shardflow.restarted' && restarts++));

// The ground truth, computed without shardflow: a Map, carried over runs in the data dir.
const truthFile = join(dataDir, 'expected.json');
const truth = new Map<string, number>(Object.entries(JSON.parse(readFileSync(truthFile, { flag: 'a+' }).toString() || '{}')));
const producer = await running.producer(clicks, 'click-source');
const random = seededRandom(producer.epoch);
const hosts = Array.from({ length: 40 }, (_, i) => `site-${i}.example`);
for (let i = 0; i < events; i++) {
  const host = hosts[Math.floor(hosts.length * random() ** 2)]!; // skewed: a few hosts get most clicks
  await producer.send({ host, path: `/page/${i % 97}`, ms: 1_700_000_000_000 + i });
  truth.set(host, (truth.get(host) ?? 0) + 1);
}
await running.quiescence({ timeoutMs: 300_000 });

const counted = (await running.askAll('count', 'hosts')).flat();
const deadLetters = await running.deadLetters('count');
await running.stop();
await broker.close();
await deleteBrokerScope(identity);

const byHost = new Map(counted.map((h) => [h.host, h]));
const problems = [...new Set([...truth.keys(), ...byHost.keys()])].filter((host) => {
  const h = byHost.get(host);
  return BigInt(truth.get(host) ?? 0) !== h?.clicks || h.stats.clicks !== truth.get(host);
});
const total = counted.reduce((a, h) => a + h.clicks, 0n);
console.log(`\nproducer click-source epoch ${producer.epoch}: sent ${events} clicks over ${args.broker}${chaos ? `, chaos ${chaos.rate}` : ''}; data dir ${dataDir}`);
console.log(`counted ${total} clicks (all runs) on ${counted.length} hosts; partition restarts: ${restarts}; dead letters: ${deadLetters.length}`);
for (const h of counted.sort((a, b) => Number(b.clicks - a.clicks)).slice(0, 5)) {
  console.log(`  ${h.host.padEnd(18)} ${String(h.clicks).padStart(6)}  first ${h.stats.firstMs} last ${h.stats.lastMs}`);
}
if (problems.length > 0 || deadLetters.length > 0) {
  console.log(`MISMATCH with the ground truth on ${problems.length} hosts: ${problems.slice(0, 5).join(', ')}`);
  process.exit(1);
}
writeFileSync(truthFile, JSON.stringify(Object.fromEntries(truth)));
console.log(`check: equal to the ground truth computed without shardflow (${truth.size} hosts)`);
if (!args['data-dir']) rmSync(dataDir, { recursive: true, force: true });
