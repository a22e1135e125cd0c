import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { graphs, tempDir } from './kit/datasets.js';
import { runCli } from './kit/cliRun.js';
import { l1Distance } from '../src/jobs/rankGraph.js';
import { readScores } from '../src/replay/graphFile.js';

// A data dir records its shape (partition count and scheme, the graph it holds); a run that
// does not fit it is refused at once with what to do, and leaves it as it was.

const rank = (dataDir: string, out: string, partitions: number, graph: string = graphs.polblogs, extra: string[] = []) =>
  runCli(['rank', '--pages', join(graph, 'pages.txt'), '--links', join(graph, 'links.tsv'), '--out', out, '--data-dir', dataDir, '--partitions', String(partitions), ...extra], { timeoutMs: 120_000 });

describe('a data dir refuses runs that do not fit it', () => {
  const tmp = tempDir('shardflow-shape-');
  after(() => tmp.cleanup());
  const dataDir = join(tmp.dir, 'data');
  const out = join(tmp.dir, 'scores.tsv');

  it('holds its partition count: another --partitions is refused, and the data dir is unchanged', async () => {
    const first = await rank(dataDir, out, 4);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stderr.split('\n')[0]!, /^data dir .*: new, 4 partitions \(fnv1a-host\/4\)/);
    const record = readFileSync(join(dataDir, 'shardflow.json'), 'utf8');
    const again = await rank(dataDir, out, 8);
    assert.notEqual(again.code, 0);
    assert.match(again.stderr, /holds 4 partitions \(fnv1a-host\/4\); this run asks for 8 .*--partitions 4/);
    assert.doesNotMatch(again.stderr, /\n\s+at /, 'no stack trace');
    assert.equal(readFileSync(join(dataDir, 'shardflow.json'), 'utf8'), record);
  });

  it('says on its first line what an existing data dir holds', async () => {
    const again = await rank(dataDir, out, 4);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stderr.split('\n')[0]!, /^data dir .*: existing, 4 partitions, holds graph .*polblogs.*: 1489 pages, 18938 links, 18938 backlinks, last round \d+; the last run stopped quiet$/);
    assert.match(again.stderr, /ranked 1489 pages, 18938 links, 18938 backlinks/);
  });

  it('holds its graph: another graph is refused unless --update', async () => {
    const other = await rank(dataDir, out, 4, graphs.epa);
    assert.notEqual(other.code, 0);
    assert.match(other.stderr, /holds graph .*polblogs.*; this run gives .*epa.*--update/);
  });

  it('holds its link weights: other --weights are refused (with or without --update), and the scores file is left as it was', async () => {
    // Found by a new user: a run with other weights did one round and wrote the old weighting's scores, exit 0.
    const scores = readFileSync(out, 'utf8');
    for (const extra of [['--weights', 'reasonable'], ['--weights', 'reasonable', '--update']]) {
      const other = await rank(dataDir, out, 4, graphs.polblogs, extra);
      assert.notEqual(other.code, 0);
      assert.match(other.stderr, /holds scores computed with --weights uniform; this run gives reasonable: .*Run with the same --weights, or give a fresh --data-dir/);
      assert.equal(readFileSync(out, 'utf8'), scores);
    }
  });

  it('holds one kind of input: a crawl into a graph\'s data dir, and a graph file on a crawl\'s, are refused', async () => {
    // Found by an operator: `rank` on a crawled data dir replaced crawled pages' outlinks by the
    // file's and exited 0 (only other weights were refused); `crawl` into a graph's mixed both.
    const crawl = await runCli(['crawl', '--seed', 'http://a.test/', '--map', 'a.test=127.0.0.1:9', '--data-dir', dataDir, '--partitions', '4', '--weights', 'uniform'], { timeoutMs: 60_000 });
    assert.notEqual(crawl.code, 0);
    assert.match(crawl.stderr, /holds a graph file \(graph .*polblogs.*\); this run gives a live crawl \(from http:\/\/a\.test\/\)\. A data dir holds one kind of input: give a fresh --data-dir/);
    const crawled = join(tmp.dir, 'crawled');
    const first = await rank(crawled, join(tmp.dir, 'crawled.tsv'), 4);
    assert.equal(first.code, 0, first.stderr);
    // The record of a crawl (as `crawl` writes it): its input has no digest.
    const file = join(crawled, 'shardflow.json');
    const record = JSON.parse(readFileSync(file, 'utf8')) as { input: Record<string, unknown> };
    record.input = { kind: 'crawl', description: 'from http://a.test/', weights: 'uniform' };
    writeFileSync(file, JSON.stringify(record));
    const graph = await rank(crawled, join(tmp.dir, 'crawled.tsv'), 4, graphs.polblogs, ['--update']);
    assert.notEqual(graph.code, 0);
    assert.match(graph.stderr, /holds a live crawl \(crawl from http:\/\/a\.test\/\); this run gives a graph file/);
  });

  it('a crawl with no valid seed is refused before its data dir is made', async () => {
    const fresh = join(tmp.dir, 'no-seed');
    const run = await runCli(['crawl', '--seed', 'notaurl', '--data-dir', fresh], { timeoutMs: 60_000 });
    assert.notEqual(run.code, 0);
    assert.match(run.stderr, /no valid seed: URL does not parse/);
    assert.equal(existsSync(fresh), false, 'no data dir made');
  });

  it('serve takes the partition count from the record and refuses a missing partition store', async () => {
    // Found by an operator: with p3 removed, serve counted 15 folders, served with 15
    // partitions and answered 404 for pages that were there (keys routed to other stores).
    const served = join(tmp.dir, 'served');
    const first = await rank(served, join(tmp.dir, 'served.tsv'), 4);
    assert.equal(first.code, 0, first.stderr);
    rmSync(join(served, 'p3'), { recursive: true });
    const serve = await runCli(['serve', '--data-dir', served, '--port', '0'], { timeoutMs: 60_000 });
    assert.notEqual(serve.code, 0);
    assert.match(serve.stderr, /partition store p3 \(.*p3\) is missing from data dir .*which holds 4 partitions/);
    const count = await runCli(['serve', '--data-dir', served, '--port', '0', '--partitions', '3'], { timeoutMs: 60_000 });
    assert.notEqual(count.code, 0);
    assert.match(count.stderr, /holds 4 partitions \(fnv1a-host\/4\); this run asks for 3/);
  });

  it('names a partition store that is damaged, and one that is missing', async () => {
    writeFileSync(join(dataDir, 'p1', 'CURRENT'), 'not a manifest name\n');
    const damaged = await rank(dataDir, out, 4);
    assert.notEqual(damaged.code, 0);
    assert.match(damaged.stderr, /partition store p1 \(.*p1\) does not open/);
    rmSync(join(dataDir, 'p2'), { recursive: true });
    const missing = await rank(dataDir, out, 4);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /partition store p2 \(.*p2\) is missing from data dir/);
  });
});

describe('a data dir whose making was cut short is made anew', () => {
  const tmp = tempDir('shardflow-shape-cut-');
  after(() => tmp.cleanup());

  it('record written, stores missing or half made (a kill 1 to 3 s into the first run): the same command runs it as new', async () => {
    // Found by a new user: a rank SIGKILLed while it created its 16 stores was then refused
    // with "holds 15 partitions ... Run with --partitions 15", which it never held.
    const dataDir = join(tmp.dir, 'data');
    const first = await rank(dataDir, join(tmp.dir, 'first.tsv'), 4);
    assert.equal(first.code, 0, first.stderr);
    const record = JSON.parse(readFileSync(join(dataDir, 'shardflow.json'), 'utf8')) as Record<string, unknown>;
    // What a kill leaves: the record of a data dir no run started on, p2 half made, p3 not made.
    writeFileSync(join(dataDir, 'shardflow.json'), JSON.stringify({ ...record, runs: 0, state: 'quiet', input: undefined }));
    rmSync(join(dataDir, 'p2'), { recursive: true });
    mkdirSync(join(dataDir, 'p2'));
    writeFileSync(join(dataDir, 'p2', 'CURRENT'), 'MANIFEST-000099\n');
    rmSync(join(dataDir, 'p3'), { recursive: true });
    const out = join(tmp.dir, 'scores.tsv');
    const again = await rank(dataDir, out, 4);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stderr.split('\n')[0]!, /^data dir .*: new, 4 partitions \(fnv1a-host\/4\)/);
    assert.match(again.stderr, /ranked 1489 pages, 18938 links, 18938 backlinks/);
    assert.ok(l1Distance(new Map(await readScores(out)), new Map(await readScores(join(tmp.dir, 'first.tsv')))) < 1e-9, 'the scores of a fresh run');
  });
});

