// The web index in the smallest form shardflow's API allows: pages keyed by host keep their
// outlinks and diff each new version against the stored one; backlinks keyed by the target's
// host fold the link operations into a set merge and an int64 in-degree, exactly once.
// Run: npm run example -- web-index [--broker redis://127.0.0.1:6379] [--chaos 0.05] [--data-dir DIR] [--graph DIR]
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  ChaosPolicy, Topology, connectBroker, decodeInt64, decodeSet, defineNamespace, deleteBrokerScope, encodeInt64,
  encodeSetOps, freshBrokerIdentity, hostOf, int64Add, msgpackCodec, seededRandom, set, type Logger,
} from 'shardflow';

/** A fetched version of a page: its outlinks as [target URL, anchor text]; `outlinks: null` is a tombstone (the page is gone). */
interface PageVersion { readonly url: string; readonly outlinks: ReadonlyArray<readonly [string, string]> | null }
/** One backlink to add or remove at `target`, sent to the partition of the target's host. */
interface LinkOp { readonly op: 'add' | 'remove'; readonly source: string; readonly target: string; readonly anchor: string }

// A URL without scheme://host throws in hostOf: the guard's throw is the dead letter's reason.
const isUrl = (u: unknown): u is string => typeof u === 'string' && hostOf(u).length > 0;
const isPage = (v: unknown): v is PageVersion => isUrl((v as PageVersion)?.url) && ((v as PageVersion).outlinks === null ||
  (Array.isArray((v as PageVersion).outlinks) && (v as PageVersion).outlinks!.every((l) => Array.isArray(l) && l.length === 2 && isUrl(l[0]) && typeof l[1] === 'string')));
const isLinkOp = (v: unknown): v is LinkOp => ((v as LinkOp)?.op === 'add' || (v as LinkOp)?.op === 'remove') &&
  isUrl((v as LinkOp).source) && isUrl((v as LinkOp).target) && typeof (v as LinkOp).anchor === 'string';

// 16 partitions by host (FNV-1a of hostOf(url)): a host's pages, and a target's backlinks, live on one partition.
const pages = defineNamespace('pages', { codec: msgpackCodec('PageVersion', isPage), partitions: 16, key: (p: PageVersion) => hostOf(p.url) });
const links = defineNamespace('links', { codec: msgpackCodec('LinkOp', isLinkOp), partitions: 16, key: (l: LinkOp) => hostOf(l.target) });
const member = (source: string, anchor: string) => JSON.stringify([source, anchor]); // one backlink in the `set` merge

const topology = Topology.create('web-index')
  .stage('pages', {
    input: pages,
    outputs: { links },
    columnFamilies: { outlinks: {} },
    // ctx.reads sees the batch's own writes: a page crawled twice in one batch is diffed
    // against its earlier version in the batch.
    async onMessage(ctx, page) {
      const stored = await ctx.reads.get('outlinks', page.url);
      const before = new Map(stored ? pages.codec.decode(stored).outlinks : []);
      const after = new Map(page.outlinks ?? []);
      for (const [target, anchor] of before) if (after.get(target) !== anchor) ctx.emit('links', { op: 'remove', source: page.url, target, anchor });
      for (const [target, anchor] of after) if (before.get(target) !== anchor) ctx.emit('links', { op: 'add', source: page.url, target, anchor });
      if (page.outlinks) ctx.writes.put('outlinks', page.url, pages.codec.encode({ url: page.url, outlinks: [...after] }));
      else ctx.writes.delete('outlinks', page.url);
    },
    async query(reads, _request: 'counts') {
      let n = 0, outlinks = 0;
      for await (const [, v] of reads.iterate('outlinks')) { n++; outlinks += pages.codec.decode(v).outlinks!.length; }
      return { pages: n, outlinks };
    },
  })
  .stage('backlinks', {
    input: links,
    columnFamilies: { backlinks: { mergeOperator: set() }, indegree: { mergeOperator: int64Add() } },
    onMessage(ctx, l) {
      const m = [member(l.source, l.anchor)];
      ctx.writes.merge('backlinks', l.target, encodeSetOps(l.op === 'add' ? { add: m } : { remove: m }));
      ctx.writes.merge('indegree', l.target, encodeInt64(l.op === 'add' ? 1 : -1));
    },
    // Every target of the partition with its in-degree and backlinks (members as `member` wrote them).
    async query(reads, _request: 'targets') {
      const out: Array<{ target: string; indegree: bigint; backlinks: string[] }> = [];
      for await (const [k, v] of reads.iterate('indegree')) {
        const members = await reads.get('backlinks', k);
        out.push({ target: k.toString(), indegree: decodeInt64(v), backlinks: members ? decodeSet(members).map(String) : [] });
      }
      return out;
    },
  });

const { values: args } = parseArgs({ options: { broker: { type: 'string', default: 'memory' }, chaos: { type: 'string' }, 'data-dir': { type: 'string' }, graph: { type: 'string', default: 'examples/data/polblogs' } } });
// The graph: real URLs (pages.txt, links.tsv); anchor text is synthetic (the target's last path segment, or host).
const urls = readFileSync(join(args.graph, 'pages.txt'), 'utf8').split('\n').filter(Boolean);
const graph = new Map<string, Map<string, string>>(urls.map((u) => [u, new Map()]));
for (const line of readFileSync(join(args.graph, 'links.tsv'), 'utf8').split('\n').filter(Boolean)) {
  const [source, target] = line.split('\t'), out = graph.get(source!);
  if (!out || !target) throw new Error(`${args.graph}/links.tsv: ${JSON.stringify(line)} is not source<TAB>target with a source from pages.txt`);
  out.set(target, target.split('/').filter(Boolean).at(-1)!);
}
// The recrawl (seeded): 3% of pages deleted, 12% changed (a third of their links dropped, a
// fifth re-anchored, two new links).
const random = seededRandom(14); // any fixed seed: each run sends the same recrawl
const recrawl: PageVersion[] = [];
for (const [url, out] of graph) {
  const r = random();
  if (r < 0.03) recrawl.push({ url, outlinks: null });
  else if (r < 0.15) {
    const kept = [...out].filter(() => random() >= 1 / 3).map(([t, a]): [string, string] => [t, random() < 0.2 ? `${a}, again` : a]);
    for (let i = 0; i < 2; i++) kept.push([urls[Math.floor(random() * urls.length)]!, 'new link']);
    recrawl.push({ url, outlinks: kept });
  }
}
const crawl: PageVersion[] = [...graph].map(([url, out]) => ({ url, outlinks: [...out] }));
const dataDir = args['data-dir'] ?? mkdtempSync(join(tmpdir(), 'web-index-'));
const unfinished = join(dataDir, 'run-unfinished'); // removed after a checked run: its broker scope dies with the run
if (existsSync(unfinished)) {
  console.error(`refused: a run on ${dataDir} did not finish (killed?); link operations it had in flight died with its broker scope, so this data dir's backlinks cannot be trusted: use a fresh --data-dir`);
  process.exit(2);
}
const quiet: Logger = { debug() {}, warn() {}, error: (f, m) => console.error(`error: ${m ?? ''}`, f) };
const identity = freshBrokerIdentity(args.broker);
const broker = await connectBroker(identity);
const chaos = args.chaos ? ChaosPolicy.parse(args.chaos) : undefined;
const running = await topology.start({ broker, dataDir, logger: quiet, ...(chaos ? { chaos } : {}) });
writeFileSync(unfinished, `${process.pid}\n`);
console.log(topology.describe());
let restarts = 0; // partitions restarted by their supervisor (each --chaos fault is one)
running.system.events$.subscribe((e) => void (e.type === '@shardflow.restarted' && restarts++));

// The ground truth without shardflow: each page's last version in a plain Map, then its backlinks.
const truth = new Map<string, Map<string, string>>();
const producer = await running.producer(pages, 'crawler');
for (const page of [...crawl, ...recrawl]) {
  await producer.send(page);
  if (page.outlinks) truth.set(page.url, new Map(page.outlinks));
  else truth.delete(page.url);
}
await running.quiescence({ timeoutMs: 300_000 });
const counts = await running.askAll('pages', 'counts');
const targets = (await running.askAll('backlinks', 'targets')).flat();
const deadLetters = [...(await running.deadLetters('pages')), ...(await running.deadLetters('backlinks'))];
await running.stop(); await broker.close(); await deleteBrokerScope(identity); // the caller's broker closes after stop()

const expected = new Map<string, string[]>();
for (const [source, out] of truth) for (const [target, anchor] of out) expected.set(target, [...(expected.get(target) ?? []), member(source, anchor)]);
const got = new Map(targets.map((t) => [t.target, t]));
const problems = [...new Set([...expected.keys(), ...got.keys()])].filter((target) => {
  const want = (expected.get(target) ?? []).sort(), t = got.get(target);
  return BigInt(want.length) !== (t?.indegree ?? 0n) || JSON.stringify(want) !== JSON.stringify((t?.backlinks ?? []).sort());
});
const stored = counts.reduce((a, c) => ({ pages: a.pages + c.pages, outlinks: a.outlinks + c.outlinks }), { pages: 0, outlinks: 0 });
const truthLinks = [...truth.values()].reduce((n, out) => n + out.size, 0);
if (stored.pages !== truth.size || stored.outlinks !== truthLinks) problems.push(`stored ${stored.pages} pages / ${stored.outlinks} links, expected ${truth.size} / ${truthLinks}`);
console.log(`\nproducer crawler epoch ${producer.epoch}: sent ${crawl.length} pages, then a recrawl of ${recrawl.length} (${recrawl.filter((p) => !p.outlinks).length} deleted) over ${args.broker}${chaos ? `, chaos ${chaos.rate}` : ''}; data dir ${dataDir}`);
console.log(`stored ${stored.pages} pages, ${stored.outlinks} links; ${targets.reduce((n, t) => n + t.backlinks.length, 0)} backlinks on ${targets.filter((t) => t.indegree > 0n).length} targets; partition restarts: ${restarts}; dead letters: ${deadLetters.length}`);
console.log(`pages per partition: ${counts.map((c) => c.pages).join(' ')}`);
for (const t of targets.sort((a, b) => Number(b.indegree - a.indegree)).slice(0, 5)) console.log(`  ${String(t.indegree).padStart(4)}  ${t.target}  (e.g. from ${JSON.parse(t.backlinks[0]!).join(', anchor ')})`);
for (const d of deadLetters.slice(0, 5)) console.log(`dead letter from ${d.message.producer}: ${d.reason}`);
if (problems.length > 0 || deadLetters.length > 0) {
  console.log(`FAILED: ${problems.length} mismatches with the ground truth (${problems.slice(0, 5).join(', ')}), ${deadLetters.length} dead letters`);
  process.exit(1);
}
rmSync(unfinished);
console.log(`check: every target's backlinks and in-degree equal the ground truth computed without shardflow (${expected.size} targets)`);
if (!args['data-dir']) rmSync(dataDir, { recursive: true, force: true });
