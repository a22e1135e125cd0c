// A two-stage pipeline with an aggregator: orders keyed by customer (8 partitions, per-customer
// record merges) emit one partial aggregate per region and batch (onBatch) into region-sales,
// keyed by region on 2 partitions, where the second stage sums them. Explicit supervision, and
// the operator console while it runs.
// Run: npm run example -- pipeline [--broker redis://127.0.0.1:6379] [--chaos 0.05] [--data-dir DIR] [--hold]
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  ChaosPolicy, SupervisorStrategy, Topology, connectBroker, decodeRecord, defineNamespace, deleteBrokerScope, encodeRecord,
  freshBrokerIdentity, msgpackCodec, record, seededRandom, type Logger,
} from 'shardflow';

interface Order { readonly id: string; readonly customer: string; readonly region: string; readonly cents: number; readonly ms: number }
interface RegionPartial { readonly region: string; readonly orders: number; readonly cents: number }
interface Totals { orders: number; cents: number }

const isInt = (v: unknown): v is number => Number.isSafeInteger(v);
const isOrder = (v: unknown): v is Order => typeof v === 'object' && v !== null && typeof (v as Order).id === 'string' &&
  typeof (v as Order).customer === 'string' && typeof (v as Order).region === 'string' && isInt((v as Order).cents) && isInt((v as Order).ms);
const isPartial = (v: unknown): v is RegionPartial =>
  typeof v === 'object' && v !== null && typeof (v as RegionPartial).region === 'string' && isInt((v as RegionPartial).orders) && isInt((v as RegionPartial).cents);

const orders = defineNamespace('orders', { codec: msgpackCodec('Order', isOrder), partitions: 8, key: (o: Order) => o.customer });
const regionSales = defineNamespace('region-sales', { codec: msgpackCodec('RegionPartial', isPartial), partitions: 2, key: (r: RegionPartial) => r.region });

// Restart a failed partition after 20 ms, doubling up to 2 s with 20% jitter; more than 60
// restarts of one partition within 10 s escalates to the root and stops the topology.
const supervision = SupervisorStrategy.restartWithBackoff({ minMs: 20, maxMs: 2_000, factor: 2, randomFactor: 0.2 }).withLimit(60, 10_000);

const topology = Topology.create('order-pipeline')
  .stage('customers', {
    input: orders,
    outputs: { regions: regionSales },
    columnFamilies: { spent: { mergeOperator: record({ orders: 'sum', cents: 'sum', firstMs: 'min', lastMs: 'max' }) } },
    supervision,
    onMessage: (ctx, o) => ctx.writes.merge('spent', o.customer, encodeRecord({ orders: 1, cents: o.cents, firstMs: o.ms, lastMs: o.ms })),
    // One partial aggregate per region for the whole batch, committed with the batch (outbox).
    onBatch(ctx, batch) {
      const partials = new Map<string, Totals>();
      for (const o of batch) {
        const t = partials.get(o.region) ?? partials.set(o.region, { orders: 0, cents: 0 }).get(o.region)!;
        t.orders++;
        t.cents += o.cents;
      }
      for (const [region, t] of partials) ctx.emit('regions', { region, ...t });
    },
    async query(reads, _request: 'customers') {
      const out: Array<[string, Totals]> = [];
      for await (const [customer, v] of reads.iterate('spent')) out.push([customer.toString(), decodeRecord<Totals>(v)]);
      return out;
    },
  })
  .stage('regions', {
    input: regionSales,
    columnFamilies: { totals: { mergeOperator: record({ orders: 'sum', cents: 'sum', partials: 'sum' }) } },
    supervision,
    onMessage: (ctx, r) => ctx.writes.merge('totals', r.region, encodeRecord({ orders: r.orders, cents: r.cents, partials: 1 })),
    async query(reads, _request: 'regions') {
      const out: Array<[string, Totals & { partials: number }]> = [];
      for await (const [region, v] of reads.iterate('totals')) out.push([region.toString(), decodeRecord<Totals & { partials: number }>(v)]);
      return out;
    },
  });

const { values: args } = parseArgs({
  options: {
    broker: { type: 'string', default: 'memory' }, chaos: { type: 'string' }, 'data-dir': { type: 'string' },
    orders: { type: 'string', default: '5000' }, hold: { type: 'boolean', default: false },
  },
});
const dataDir = args['data-dir'] ?? mkdtempSync(join(tmpdir(), 'pipeline-'));
const count = Number(args.orders);
const quiet: Logger = { debug() {}, warn() {}, error: (f, m) => console.error(`error: ${m ?? ''}`, f) };
const identity = freshBrokerIdentity(args.broker);
const broker = await connectBroker(identity);
const chaos = args.chaos ? ChaosPolicy.parse(args.chaos) : undefined;
const running = await topology.start({ broker, dataDir, logger: quiet, inspect: { port: 0 }, ...(chaos ? { chaos } : {}) });
console.log(topology.describe());
console.log(`console: ${running.inspection!.url}/ (tree: ${running.inspection!.url}/tree, metrics: ${running.inspection!.url}/metrics)`);
let restarts = 0;
running.system.events$.subscribe((e) => void (e.type === '@shardflow.restarted' && restarts++));

// The ground truth, computed without shardflow: two Maps, carried over runs in the data dir.
const truthFile = join(dataDir, 'expected.json');
const saved = JSON.parse(readFileSync(truthFile, { flag: 'a+' }).toString() || '{"customers":{},"regions":{}}');
const byCustomer = new Map<string, Totals>(Object.entries(saved.customers));
const byRegion = new Map<string, Totals>(Object.entries(saved.regions));
const add = (m: Map<string, Totals>, k: string, cents: number) => {
  const t = m.get(k) ?? m.set(k, { orders: 0, cents: 0 }).get(k)!;
  t.orders++;
  t.cents += cents;
};
const producer = await running.producer(orders, 'order-source');
const random = seededRandom(producer.epoch);
const regions = ['eu-west', 'eu-north', 'us-east', 'us-west', 'ap-south', 'sa-east'];
for (let i = 0; i < count; i++) {
  const customer = `c-${String(Math.floor(400 * random() ** 2)).padStart(3, '0')}`; // skewed: a few customers order most
  const order = { id: `o-${producer.epoch}-${i}`, customer, region: regions[Math.floor(random() * regions.length)]!, cents: 100 + Math.floor(random() * 50_000), ms: 1_700_000_000_000 + i };
  await producer.send(order);
  add(byCustomer, customer, order.cents);
  add(byRegion, order.region, order.cents);
}
await running.quiescence({ timeoutMs: 300_000 });

const customers = new Map((await running.askAll('customers', 'customers')).flat());
const regionTotals = (await running.askAll('regions', 'regions')).flat().sort((a, b) => b[1].cents - a[1].cents);
const deadLetters = [...(await running.deadLetters('customers')), ...(await running.deadLetters('regions'))];
if (args.hold) {
  console.log('holding: the console stays up until stdin ends');
  process.stdin.resume();
  await new Promise((resolve) => process.stdin.once('end', resolve));
}
await running.stop();
await broker.close();
await deleteBrokerScope(identity);

const same = (a: Totals | undefined, b: Totals | undefined) => a?.orders === b?.orders && a?.cents === b?.cents;
const problems = [
  ...[...new Set([...byCustomer.keys(), ...customers.keys()])].filter((c) => !same(byCustomer.get(c), customers.get(c))),
  ...[...new Set([...byRegion.keys(), ...regionTotals.map(([r]) => r)])].filter((r) => !same(byRegion.get(r), regionTotals.find(([k]) => k === r)?.[1])),
];
const partials = regionTotals.reduce((n, [, t]) => n + t.partials, 0);
const total = regionTotals.reduce((n, [, t]) => n + t.orders, 0);
console.log(`\nproducer order-source epoch ${producer.epoch}: sent ${count} orders over ${args.broker}${chaos ? `, chaos ${chaos.rate}` : ''}; data dir ${dataDir}`);
console.log(`customers: ${customers.size}; regions: ${regionTotals.length}, ${total} orders (all runs) from ${partials} partial aggregates; partition restarts: ${restarts}; dead letters: ${deadLetters.length}`);
for (const [region, t] of regionTotals) console.log(`  ${region.padEnd(9)} ${String(t.orders).padStart(6)} orders ${(t.cents / 100).toFixed(2).padStart(13)}  (${t.partials} partials)`);
if (problems.length > 0 || deadLetters.length > 0) {
  console.log(`MISMATCH with the ground truth on ${problems.length} keys: ${problems.slice(0, 5).join(', ')}`);
  for (const d of deadLetters.slice(0, 5)) console.log(`  dead letter: ${d.reason}`);
  process.exit(1);
}
writeFileSync(truthFile, JSON.stringify({ customers: Object.fromEntries(byCustomer), regions: Object.fromEntries(byRegion) }));
console.log(`check: equal to the ground truth computed without shardflow (${byCustomer.size} customers, ${byRegion.size} regions)`);
if (!args['data-dir']) rmSync(dataDir, { recursive: true, force: true });
