import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { l1Distance } from '../src/jobs/rankGraph.js';
import { readScores } from '../src/replay/graphFile.js';
import { graphs, tempDir } from './kit/datasets.js';
import { pulsarUnavailable } from './kit/brokers.js';
import { readScoresFile, runCli, seededRandom, type KillPoint } from './kit/cliRun.js';
import { checkBacklinkCopies } from './kit/backlinkCopies.js';

// The crash matrix of a `shardflow rank` job: killed (SIGKILL) at seeded points during the
// load and during the metric rounds, or interrupted (SIGINT) during the rounds, over each
// broker; the same command on the same --data-dir must then end exactly like an
// uninterrupted run (L1 <= 1e-6 to the reference, exact page, link and backlink counts, every
// backlink's copy of its source's metric within its bound):
// repaired from the stores after the in-memory broker, resumed from the broker otherwise.

const redisUrl = process.env.SHARDFLOW_REDIS_URL ?? 'redis://127.0.0.1:6379';
const pulsarUrl = process.env.SHARDFLOW_PULSAR_URL ?? 'pulsar://127.0.0.1:8080';

interface Graph {
  readonly dir: string;
  readonly pages: number;
  readonly links: number;
}
const polblogs: Graph = { dir: graphs.polblogs, pages: 1489, links: 18938 };
const epa: Graph = { dir: graphs.epa, pages: 4662, links: 8836 }; // 8965 lines, 8836 distinct links

/** The kill points of one broker's matrix, drawn from `seed`. */
function killPoints(seed: number): Array<{ name: string; kill: KillPoint; expectCode?: number }> {
  const random = seededRandom(seed);
  const round = 2 + Math.floor(random() * 30);
  const sigintRound = 2 + Math.floor(random() * 30);
  const loadDelay = Math.floor(random() * 300);
  return [
    { name: `SIGKILL ${loadDelay} ms into the load`, kill: { signal: 'SIGKILL', when: (l) => l.includes('"msg":"loading the graph"'), delayMs: loadDelay } },
    { name: `SIGKILL at metric round ${round}`, kill: { signal: 'SIGKILL', when: (l) => roundOf(l) >= round } },
    { name: `SIGINT at metric round ${sigintRound}`, kill: { signal: 'SIGINT', when: (l) => roundOf(l) >= sigintRound }, expectCode: 130 },
  ];
}

function roundOf(line: string): number {
  if (!line.includes('"msg":"metric round"')) return -1;
  return (JSON.parse(line) as { round: number }).round;
}

async function brokerReady(spec: string): Promise<string | undefined> {
  if (spec === 'memory') return undefined;
  if (spec.startsWith('pulsar://')) return pulsarUnavailable(`http://${spec.slice('pulsar://'.length)}`);
  const redis = new Redis(spec, { lazyConnect: true, connectTimeout: 2000, maxRetriesPerRequest: 0 });
  try {
    await redis.connect();
    await redis.ping();
    return undefined;
  } catch (err) {
    return `${spec}: ${(err as Error).message}`;
  } finally {
    redis.disconnect();
  }
}

function matrix(spec: string, graph: Graph, partitions: number, seed: number): void {
  describe(`rank over ${spec === 'memory' ? 'the in-memory broker' : spec}, killed and run again`, () => {
    const tmp = tempDir('shardflow-crash-');
    after(() => tmp.cleanup());
    let reference: Map<string, number>;
    for (const point of killPoints(seed)) {
      it(point.name, async (t) => {
        const unavailable = await brokerReady(spec);
        if (unavailable) {
          if (process.env.SHARDFLOW_REQUIRE_BROKERS === '1') assert.fail(`broker required (SHARDFLOW_REQUIRE_BROKERS=1) but unavailable: ${unavailable}`);
          t.skip(unavailable);
          return;
        }
        reference ??= new Map(await readScores(join(graph.dir, 'pagerank.tsv')));
        const dataDir = join(tmp.dir, point.name.replace(/\W+/g, '-'));
        const out = join(tmp.dir, 'scores.tsv');
        const args = ['rank', '--pages', join(graph.dir, 'pages.txt'), '--links', join(graph.dir, 'links.tsv'), '--out', out, '--data-dir', dataDir, '--partitions', String(partitions), '--broker', spec, '--log-level', 'info'];
        const first = await runCli(args, { kill: point.kill });
        assert.ok(first.killed, `the kill point was reached (exit ${first.code}): ${tail(first.stderr)}`);
        if (point.expectCode !== undefined) {
          assert.equal(first.code, point.expectCode, `SIGINT stops cleanly with ${point.expectCode}: ${tail(first.stderr)}`);
          assert.match(first.stderr, /stopped by SIGINT/);
        } else assert.equal(first.signal, 'SIGKILL');
        const record = JSON.parse(readFileSync(join(dataDir, 'shardflow.json'), 'utf8')) as { state: string };
        assert.equal(record.state, 'running', 'a stop with messages in flight is not recorded as quiet');

        rmSync(out, { force: true });
        const second = await runCli(args);
        assert.equal(second.code, 0, tail(second.stderr));
        const firstLine = second.stderr.split('\n')[0]!;
        assert.match(firstLine, /^data dir .*: existing, .* pages, .* links, .* backlinks, last round \d+; the last run did not stop quiet/);
        // The in-memory broker lost what was in flight: repaired from the stores. A durable
        // broker still holds it: the re-run applies it first (resumes).
        // A run killed before its actors subscribed left no subscription to resume: repaired.
        const repaired = /repaired: \d+ links sent again/;
        const resumed = /resumed: \d+ messages the last run left on the broker applied/;
        if (spec === 'memory') assert.match(second.stderr, repaired);
        else if (/the broker does not hold what the last run left/.test(second.stderr)) assert.match(second.stderr, repaired);
        else assert.match(second.stderr, resumed);
        const counts = /ranked (\d+) pages, (\d+) links, (\d+) backlinks in/.exec(second.stderr);
        assert.ok(counts, tail(second.stderr));
        assert.deepEqual(counts.slice(1).map(Number), [graph.pages, graph.links, graph.links], 'exact page, link and backlink counts');
        const scores = readScoresFile(out);
        assert.equal(scores.size, graph.pages);
        const l1 = l1Distance(scores, reference);
        assert.ok(l1 <= 1e-6, `L1 ${l1} after the re-run`);
        const sum = [...scores.values()].reduce((a, b) => a + b, 0);
        assert.ok(Math.abs(sum - 1) < 1e-9, `scores sum to 1 (${sum})`);
        assert.ok(existsSync(join(dataDir, 'shardflow.json')));
        assert.equal((JSON.parse(readFileSync(join(dataDir, 'shardflow.json'), 'utf8')) as { state: string }).state, 'quiet');
        // Every backlink holds a copy of its source's x within the bound (COPY_RELATIVE_BOUND),
        // whatever the kill lost: the copies were committed with the pushes and flushes, and
        // the re-run's first push (or the repair) sends every page's copy again.
        const copies = await checkBacklinkCopies(dataDir, partitions);
        assert.equal(copies.backlinks, graph.links);
        assert.equal(copies.missing, 0, copies.example);
        assert.equal(copies.outside, 0, copies.example);
      });
    }
  });
}

function tail(text: string): string {
  return text.split('\n').filter((l) => !l.startsWith('{')).slice(-6).join('\n');
}

matrix('memory', polblogs, 16, 1);
matrix(redisUrl, polblogs, 8, 2);
matrix(pulsarUrl, epa, 4, 3);
