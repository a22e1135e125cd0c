// An inverted index with expiry: documents keyed by id (4 partitions) become one posting per (word,
// document), keyed by word (3 partitions), in column families with a ttl(...) compaction filter on the
// document's time; all-time word counts (int64 add, no filter) stay. running.compact drops the expired.
// Run: npm run example -- word-count [--broker redis://127.0.0.1:6379] [--chaos 0.05] [--data-dir DIR]
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  ChaosPolicy, Topology, connectBroker, decodeInt64, decodeRecord, defineNamespace, deleteBrokerScope, encodeInt64, encodeRecord,
  freshBrokerIdentity, int64Add, msgpackCodec, seededRandom, ttl, type Logger,
} from 'shardflow';

interface Doc { readonly id: string; readonly text: string; readonly ms: number }
interface Posting { readonly word: string; readonly doc: string; readonly n: number; readonly ms: number }
interface WordStats { docs: number; occurrences: number }

const DAY = 86_400_000;
const TTL_MS = 7 * DAY; // postings and documents older than a week expire at the next compaction
const isInt = (v: unknown): v is number => Number.isSafeInteger(v);
const isDoc = (v: unknown): v is Doc =>
  typeof v === 'object' && v !== null && typeof (v as Doc).id === 'string' && typeof (v as Doc).text === 'string' && isInt((v as Doc).ms);
const isPosting = (v: unknown): v is Posting => typeof v === 'object' && v !== null && typeof (v as Posting).word === 'string' &&
  typeof (v as Posting).doc === 'string' && isInt((v as Posting).n) && isInt((v as Posting).ms);

const documents = defineNamespace('documents', { codec: msgpackCodec('Doc', isDoc), partitions: 4, key: (d: Doc) => d.id });
const postings = defineNamespace('postings', { codec: msgpackCodec('Posting', isPosting), partitions: 3, key: (p: Posting) => p.word });

const topology = Topology.create('word-count')
  .stage('docs', {
    input: documents,
    outputs: { postings },
    columnFamilies: { docs: { compactionFilter: ttl({ field: 'ms', ttlMs: TTL_MS }) } },
    onMessage(ctx, doc) {
      const counts = new Map<string, number>();
      for (const w of doc.text.toLowerCase().match(/[a-z']+/g) ?? []) counts.set(w, (counts.get(w) ?? 0) + 1);
      ctx.writes.put('docs', doc.id, encodeRecord({ ms: doc.ms, words: counts.size })); // a msgpack map: the filter reads `ms`
      for (const [word, n] of counts) ctx.emit('postings', { word, doc: doc.id, n, ms: doc.ms });
    },
    async query(reads, _request: 'count') {
      let n = 0;
      for await (const _ of reads.iterate('docs')) n++;
      return n;
    },
  })
  .stage('words', {
    input: postings,
    columnFamilies: { postings: { compactionFilter: ttl({ field: 'ms', ttlMs: TTL_MS }) }, seen: { mergeOperator: int64Add() } },
    onMessage(ctx, p) {
      ctx.writes.put('postings', `${p.word}\0${p.doc}`, encodeRecord({ n: p.n, ms: p.ms }));
      ctx.writes.merge('seen', p.word, encodeInt64(p.n));
    },
    // Per word: live postings (documents, occurrences) and all-time occurrences.
    async query(reads, _request: 'index') {
      const index = new Map<string, WordStats & { seen: bigint }>();
      for await (const [word, v] of reads.iterate('seen')) index.set(word.toString(), { docs: 0, occurrences: 0, seen: decodeInt64(v) });
      for await (const [key, v] of reads.iterate('postings')) {
        const w = index.get(key.subarray(0, key.indexOf(0)).toString())!;
        w.docs++;
        w.occurrences += decodeRecord<{ n: number }>(v).n;
      }
      return [...index];
    },
  });

const options = { broker: { type: 'string', default: 'memory' }, chaos: { type: 'string' }, 'data-dir': { type: 'string' }, docs: { type: 'string', default: '1000' } } as const;
const { values: args } = parseArgs({ options });
const dataDir = args['data-dir'] ?? mkdtempSync(join(tmpdir(), 'word-count-'));
const quiet: Logger = { debug() {}, warn() {}, error: (f, m) => console.error(`error: ${m ?? ''}`, f) };
const identity = freshBrokerIdentity(args.broker);
const broker = await connectBroker(identity);
const chaos = args.chaos ? ChaosPolicy.parse(args.chaos) : undefined;
const running = await topology.start({ broker, dataDir, logger: quiet, ...(chaos ? { chaos } : {}) });
console.log(topology.describe());

// The ground truth, without shardflow: the time and word counts of every document not yet
// expired, and all-time word counts (carried over runs in the data dir).
const truthFile = join(dataDir, 'expected.json');
const saved = JSON.parse(readFileSync(truthFile, { flag: 'a+' }).toString() || '{"docs":[],"seen":{}}');
const truth: Array<{ ms: number; words: Record<string, number> }> = saved.docs;
const seen = new Map<string, number>(Object.entries(saved.seen));
const producer = await running.producer(documents, 'doc-source');
const random = seededRandom(producer.epoch);
const vocabulary = ('the of and to in a is that for it as was with be by on not he this are or his from at which but have an they you were her ' +
  "she there would their we him been has when who will no more if out so up said what its about than into them can only other time new some " +
  "could these two may first then do any like my now over such our man me even most made after also did many before must through back years where much your way well don't").split(' ');
for (let i = 0; i < Number(args.docs); i++) {
  const words = Array.from({ length: 5 + Math.floor(random() * 40) }, () => vocabulary[Math.floor(vocabulary.length * random() ** 3)]!);
  const text = words.map((w, k) => (k === 0 ? w[0]!.toUpperCase() + w.slice(1) : random() < 0.1 ? `${w},` : w)).join(' ') + '.';
  const ms = Date.now() - (random() < 0.3 ? 8 * DAY + random() * 20 * DAY : random() * 3_600_000); // 30% older than the TTL by a day or more
  await producer.send({ id: `d-${producer.epoch}-${i}`, text, ms: Math.round(ms) });
  const counts: Record<string, number> = {};
  for (const w of words) counts[w] = (counts[w] ?? 0) + 1;
  for (const w of words) seen.set(w, (seen.get(w) ?? 0) + 1);
  truth.push({ ms: Math.round(ms), words: counts });
}
await running.quiescence({ timeoutMs: 300_000 });

const tally = (docs: typeof truth) => {
  const m = new Map<string, WordStats>();
  for (const d of docs) for (const [w, n] of Object.entries(d.words)) {
    const s = m.get(w) ?? m.set(w, { docs: 0, occurrences: 0 }).get(w)!;
    s.docs++;
    s.occurrences += n;
  }
  return m;
};
const cutoff = Date.now() - TTL_MS; // the filter compares with the wall clock; ages are a day or more from the cut-off
const live = truth.filter((d) => d.ms >= cutoff);
const [liveWords, allWords] = [tally(live), tally(truth)];
const problems: string[] = [];
// Exact after our compaction. Before it, RocksDB's own compactions (after a restart's flush)
// may have dropped some expired values already: each count lies between the live and all.
const check = async (when: string, exact: boolean) => {
  const index = (await running.askAll('words', 'index')).flat();
  const docCount = (await running.askAll('docs', 'count')).reduce((a, b) => a + b, 0);
  const within = (n: number, lo = 0, hi = 0) => (exact ? n === lo : lo <= n && n <= hi);
  const bad = index.filter(([w, s]) => s.seen !== BigInt(seen.get(w) ?? -1) ||
    !within(s.docs, liveWords.get(w)?.docs, allWords.get(w)?.docs) || !within(s.occurrences, liveWords.get(w)?.occurrences, allWords.get(w)?.occurrences));
  if (bad.length > 0 || index.length !== seen.size || !within(docCount, live.length, truth.length)) {
    problems.push(`${when}: ${bad.length} words differ (${bad.slice(0, 3).map(([w]) => w).join(', ')}), ${docCount} documents (${live.length} live of ${truth.length})`);
  }
  const postingCount = index.reduce((a, [, s]) => a + s.docs, 0);
  console.log(`${when}: ${docCount} documents, ${postingCount} postings of ${index.filter(([, s]) => s.docs > 0).length} words; all-time counts of ${index.length} words`);
  return { index, docCount, postingCount };
};
const before = await check('before compaction', false);
const sum = (reports: ReadonlyArray<{ dropped: number }>) => reports.reduce((a, r) => a + r.dropped, 0);
const droppedDocs = sum(await running.compact('docs', 'docs'));
const droppedPostings = sum(await running.compact('words', 'postings'));
const allPostings = [...allWords.values()].reduce((a, w) => a + w.docs, 0);
console.log(`compaction (ttl ${TTL_MS / DAY} days): the filter dropped ${droppedDocs} documents and ${droppedPostings} postings` +
  ` (before it, RocksDB's own compactions had dropped ${truth.length - before.docCount} and ${allPostings - before.postingCount})`);
const { index } = await check('after compaction', true);
const deadLetters = [...(await running.deadLetters('docs')), ...(await running.deadLetters('words'))];
await running.stop();
await broker.close();
await deleteBrokerScope(identity);

console.log(`\nproducer doc-source epoch ${producer.epoch}: sent ${args.docs} documents over ${args.broker}${chaos ? `, chaos ${chaos.rate}` : ''}; data dir ${dataDir}`);
for (const [w, s] of index.sort((a, b) => b[1].occurrences - a[1].occurrences).slice(0, 5)) {
  console.log(`  ${w.padEnd(6)} live: ${String(s.occurrences).padStart(6)} in ${String(s.docs).padStart(5)} documents; all time: ${s.seen}`);
}
if (problems.length > 0 || deadLetters.length > 0) {
  console.log(`MISMATCH with the ground truth: ${problems.join('; ')}; dead letters: ${deadLetters.length} ${deadLetters[0]?.reason ?? ''}`);
  process.exit(1);
}
writeFileSync(truthFile, JSON.stringify({ docs: live, seen: Object.fromEntries(seen) }));
console.log(`check: equal to the ground truth computed without shardflow after compaction, within it before (${truth.length} documents, ${live.length} live)`);
if (!args['data-dir']) rmSync(dataDir, { recursive: true, force: true });
