// The web index on a cluster (docs/cluster.md, "Figures" and "Projection to the seed's
// scale"): a graph ranked by 1, 2, 4 `shardflow worker --web-index` processes on this machine
// against the one-process `rankGraph`, all over Redis Streams; the failover of a SIGKILLed
// worker during the metric rounds; and the per-link costs a projection needs.
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import { DEFAULT_LEASE_MS, clusterStatus, connectBroker, connectClusterClient, type ClusterClient, type ClusterStatus } from '../src/index.js';
import { Store } from '../src/storage/index.js';
import { rankGraph, l1Distance } from '../src/jobs/rankGraph.js';
import { rankOnCluster } from '../src/jobs/clusterRank.js';
import { startLocalWorkers, type LocalWorkers } from '../src/cli/localCluster.js';
import { readGraph, readScores } from '../src/replay/graphFile.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import type { RoundSummary } from '../src/actors/metrics/coordinator.js';
import type { PushReport } from '../src/actors/metrics/metricActor.js';
import { partitionColumnFamilies } from '../src/actors/partition/schema.js';
import { WEB_INDEX_STAGE } from '../src/topology/clusterProtocol.js';
import type { PartitionAsker } from '../src/jobs/clusterQuiet.js';
import { rankBenchOptions } from './lib/rankOptions.js';
import { REDIS, benchScope, redisUnreachable, until, type BenchScope } from './lib/clusterScope.js';
import { dirBytes, ownCpuSeconds, peakRss, processCpuSeconds, redisCpu, type DirBytes, type RedisCpu } from './lib/processCost.js';

/**
 * The smoke run's hang bound in test/bench.smoke.test.ts, ms: the smoke run ranks polblogs in
 * one process, then on one and two worker processes and through a failover (each worker
 * process loads the sources): 60 s alone on a slow 2-core machine and past the
 * default 90 s bound there when the unit tests run beside it.
 */
export const smokeHangMs = 300_000;

/** Top-level fields of the result line besides bench/run.mjs's (checked by test/bench.smoke.test.ts). */
export const resultFields = ['smoke', 'params', 'loadAverage', 'oneProcess', 'workers', 'failover', 'perLink'] as const;

const log: Logger = pino({ level: 'warn' }, pino.destination(2));

/** Mean and max of a list (0 and 0 when empty), rounded to integers. */
function meanMax(xs: readonly number[]): { mean: number; max: number } {
  if (xs.length === 0) return { mean: 0, max: 0 };
  return { mean: Math.round(xs.reduce((a, b) => a + b, 0) / xs.length), max: Math.max(...xs) };
}

const r3 = (x: number): number => Math.round(x * 1000) / 1000;
const load = (): number[] => loadavg().map((x) => Math.round(x * 100) / 100);

/** What a push cost in one round, per round, from the coordinator's summaries. */
function roundFigures(rounds: readonly RoundSummary[]) {
  const later = rounds.slice(1);
  return {
    messagesPerRound: meanMax(rounds.map((r) => r.messages)),
    bytesPerRound: {
      ...meanMax(rounds.map((r) => r.bytes)),
      first: rounds[0]?.bytes ?? 0,
      laterMean: meanMax(later.map((r) => r.bytes)).mean,
      // Rounds by tenths of the run (mean bytes of each tenth): how the push threshold
      // makes late rounds cheap.
      byTenth: Array.from({ length: Math.min(10, rounds.length) }, (_, i) => {
        const a = Math.floor((i * rounds.length) / Math.min(10, rounds.length));
        const b = Math.floor(((i + 1) * rounds.length) / Math.min(10, rounds.length));
        return meanMax(rounds.slice(a, b).map((r) => r.bytes)).mean;
      }),
    },
    pushesPerRound: meanMax(rounds.map((r) => r.pushed)),
  };
}

/** CPU seconds of a set of processes at one instant (see `processCpuSeconds`, `ownCpuSeconds`, `RedisCpu`). */
interface CpuSample {
  readonly workers: number;
  readonly client: number;
  readonly redis: Promise<number>;
}

function sample(pids: readonly number[], redis: RedisCpu): CpuSample {
  const redisSeconds = redis.seconds();
  redisSeconds.catch(() => undefined); // awaited where used
  return { workers: pids.reduce((t, pid) => t + processCpuSeconds(pid), 0), client: ownCpuSeconds(), redis: redisSeconds };
}

async function cpuBetween(a: CpuSample, b: CpuSample) {
  return { workers: r3(b.workers - a.workers), client: r3(b.client - a.client), redis: r3((await b.redis) - (await a.redis)) };
}

/**
 * A `PartitionAsker` that passes every ask (and claim) to `client` and keeps the push reports of the
 * metric rounds (`{ kind: 'metrics', message: { type: 'push' } }`), per round and source
 * partition: what each partition sent to each other partition (`sent[q]`, `bytes[q]`).
 * A push asked again (a retry, a new owner) replaces the earlier report of that round.
 */
function recordingPushes(client: ClusterClient): { asker: PartitionAsker & Pick<ClusterClient, 'claim'>; pushes: Map<number, Map<number, PushReport>> } {
  const pushes = new Map<number, Map<number, PushReport>>();
  const asker: PartitionAsker & Pick<ClusterClient, 'claim'> = {
    claim: (name, value) => client.claim(name, value),
    async ask(stage, partition, request, options) {
      const reply = await client.ask(stage, partition, request, options);
      const message = (request as { kind?: string; message?: { type?: string; round?: number } }).message;
      if ((request as { kind?: string }).kind === 'metrics' && message?.type === 'push' && typeof message.round === 'number') {
        let round = pushes.get(message.round);
        if (!round) pushes.set(message.round, (round = new Map()));
        round.set(partition, reply as PushReport);
      }
      return reply;
    },
  };
  return { asker, pushes };
}

/** The owner (member id) of each web-index partition, in partition order. */
function owners(status: ClusterStatus, partitions: number): string[] {
  const out = new Array<string>(partitions);
  for (const p of status.partitions) if (p.stage === WEB_INDEX_STAGE && p.owner !== undefined) out[p.partition] = p.owner;
  return out;
}

/**
 * Messages and bytes of each round that went from a partition to a partition owned by
 * another worker (another process), exactly: the push reports give what partition p sent to
 * each q, the cluster status who owns p and q.
 */
function crossWorker(pushes: Map<number, Map<number, PushReport>>, rounds: readonly RoundSummary[], owner: readonly string[]) {
  const messages: number[] = [];
  const bytes: number[] = [];
  let allMessages = 0;
  let allCross = 0;
  for (const r of rounds) {
    let m = 0;
    let b = 0;
    for (const [p, report] of pushes.get(r.round) ?? []) {
      report.sent.forEach((c, q) => {
        allMessages += c;
        if (owner[p] !== owner[q]) {
          m += c;
          allCross += c;
          b += report.bytes?.[q] ?? 0;
        }
      });
    }
    messages.push(m);
    bytes.push(b);
  }
  return { messagesPerRound: meanMax(messages), bytesPerRound: meanMax(bytes), fraction: allMessages > 0 ? r3(allCross / allMessages) : 0 };
}

/**
 * Changes of owner of the web-index partitions from `start` to `end`: the growth of the sum
 * of their lease epochs (an epoch grows at every acquisition). Above 0 in a run without a
 * kill, a worker lost leases it should have renewed (its heartbeat ran late). The moves of
 * the start-up rebalancing (the first worker takes every partition, the leader then moves
 * 16 - 16/w of them to the others) happen before `start` and are not counted.
 */
function ownerChanges(start: ClusterStatus, end: ClusterStatus): number {
  const sum = (s: ClusterStatus) => s.partitions.filter((p) => p.stage === WEB_INDEX_STAGE).reduce((t, p) => t + p.epoch, 0);
  return sum(end) - sum(start);
}

/**
 * Polls the cluster status until every web-index partition runs on a live worker (and, given,
 * none on `not`), spread evenly: each of the `workers` live workers owns at least
 * floor(partitions / workers) of them (the leader moves a few at a time after a join, so
 * every worker live is not yet every worker holding its share).
 */
function allRunning(s: BenchScope, partitions: number, workers: number, not?: string): Promise<ClusterStatus> {
  return until('every partition running', async () => {
    const st = await clusterStatus({ cluster: REDIS, clusterName: s.clusterName });
    const live = new Set(st.workers.map((w) => w.id));
    const units = st.partitions.filter((p) => p.stage === WEB_INDEX_STAGE);
    const ok = st.workers.length === workers && units.length === partitions &&
      units.every((p) => p.state === 'running' && p.owner !== undefined && live.has(p.owner) && p.owner !== not) &&
      st.workers.every((w) => units.filter((p) => p.owner === w.id).length >= Math.floor(partitions / workers));
    return ok ? st : undefined;
  });
}

/**
 * Bytes of the partition stores (`<dataDir>/web-index/p<i>`): `asLeft` as the workers closed
 * them (SIGTERM: committed, closed; the last writes may sit in the write-ahead log rather
 * than in table files), `flushed` once each is opened and its memtables flushed (table files
 * with every version and merge operand the compactions so far kept), `compacted` after a
 * full compaction of every column family (one version per key, merges collapsed), and then
 * the live table bytes of each column family (`compactedByFamily`, summed over partitions).
 */
async function storeBytes(dataDir: string, partitions: number): Promise<{ asLeft: DirBytes; flushed: DirBytes; compacted: DirBytes; compactedByFamily: Record<string, number> }> {
  const dirs = Array.from({ length: partitions }, (_, p) => join(dataDir, 'web-index', `p${p}`));
  const sum = (xs: DirBytes[]): DirBytes => ({ all: xs.reduce((t, x) => t + x.all, 0), sst: xs.reduce((t, x) => t + x.sst, 0) });
  const asLeft = sum(dirs.map(dirBytes));
  const families = partitionColumnFamilies();
  const flushed: DirBytes[] = [];
  const byFamily: Record<string, number> = {};
  for (const dir of dirs) {
    const store = await Store.open({ path: dir, columnFamilies: families });
    try {
      await store.flush();
      flushed.push(dirBytes(dir));
      for (const cf of Object.keys(families)) await store.compactRange(cf);
      for (const [cf, st] of Object.entries(store.stats().columnFamilies)) byFamily[cf] = (byFamily[cf] ?? 0) + st.liveSstBytes;
    } finally {
      await store.close();
    }
  }
  return { asLeft, flushed: sum(flushed), compacted: sum(dirs.map(dirBytes)), compactedByFamily: byFamily };
}

interface Setup {
  readonly dir: string;
  readonly file: (base: string) => string;
  readonly partitions: number;
  readonly tolerance: number;
  readonly leaseMs: number;
  readonly reference: Map<string, number> | undefined;
  readonly redis: RedisCpu;
}

const readTheGraph = (s: Setup) => () => readGraph(s.file('pages.txt'), s.file('links.tsv'));
const l1Of = (s: Setup, scores: Array<[string, number]>) => (s.reference ? l1Distance(new Map(scores), s.reference) : null);

/** `rankGraph` in this process over Redis Streams (the cluster runs' broker kind), with its CPU and round figures. */
async function oneProcess(s: Setup) {
  const scope = benchScope('one');
  const broker = await connectBroker(scope.identity);
  const rounds: RoundSummary[] = [];
  const loadAverage = [load()];
  try {
    let loaded: CpuSample | undefined;
    let lastRound: CpuSample | undefined;
    const start = sample([], s.redis);
    const { scores, ...r } = await rankGraph({
      graph: readTheGraph(s), partitions: s.partitions, dataDir: scope.dataDir, broker, weigh: uniformWeights, tolerance: s.tolerance, log,
      onLoaded: () => (loaded = sample([], s.redis)),
      onRound: (summary) => {
        rounds.push(summary);
        lastRound = sample([], s.redis);
      },
    });
    loadAverage.push(load());
    const load_ = await cpuBetween(start, loaded!);
    const converge = await cpuBetween(loaded!, lastRound!);
    return {
      loadSeconds: r3(r.loadSeconds), convergeSeconds: r3(r.convergeSeconds), seconds: r3(r.loadSeconds + r.convergeSeconds),
      rounds: r.converge.rounds, converged: r.converge.converged, l1: l1Of(s, scores),
      pages: r.pages, links: r.outlinks, ...roundFigures(rounds),
      // This process includes reading and publishing the graph during the load, like the rank client.
      cpuSeconds: { load: { process: load_.client, redis: load_.redis }, converge: { process: converge.client, redis: converge.redis } },
      loadAverage,
    };
  } finally {
    await broker.close();
    await scope.dispose();
  }
}

/** A cluster of `n` local web-index workers on a fresh scope, its broker and client, until `body` returns; SIGTERMs the workers, then `after(scope)`, then cleans up. */
async function withCluster<T>(s: Setup, n: number, tag: string, body: (c: { scope: BenchScope; workers: LocalWorkers; client: ClusterClient; broker: Awaited<ReturnType<typeof connectBroker>>; status: ClusterStatus }) => Promise<T>, after?: (scope: BenchScope) => Promise<void>): Promise<T> {
  const scope = benchScope(tag);
  const workers = startLocalWorkers({ workers: n, cluster: REDIS, clusterName: scope.clusterName, broker: REDIS, dataDir: scope.dataDir, partitions: s.partitions, leaseMs: s.leaseMs });
  const broker = await connectBroker(scope.identity);
  let client: ClusterClient | undefined;
  try {
    client = await connectClusterClient({ cluster: REDIS, clusterName: scope.clusterName, broker });
    const status = await allRunning(scope, s.partitions, n);
    const out = await body({ scope, workers, client, broker, status });
    const codes = await workers.stop();
    if (codes.some((c, i) => c !== 0 && workers.processes[i]!.signalCode !== 'SIGKILL')) throw new Error(`a worker did not exit 0 after SIGTERM: exit codes ${JSON.stringify(codes)}`);
    await after?.(scope);
    return out;
  } finally {
    await workers.kill();
    await client?.close();
    await broker.close();
    await scope.dispose();
  }
}

/** `n` worker processes rank the graph (a client in this process), with the cross-worker traffic per round, their CPU and, when `measureDisk`, the stores' bytes. */
async function onWorkers(s: Setup, n: number, measureDisk: boolean) {
  let disk: Awaited<ReturnType<typeof storeBytes>> | undefined;
  const result = await withCluster(s, n, `w${n}`, async ({ workers, client, broker, status }) => {
    const pids = workers.processes.map((c) => c.pid!);
    const owner = owners(status, s.partitions);
    const { asker, pushes } = recordingPushes(client);
    const rounds: RoundSummary[] = [];
    const loadAverage = [load()];
    let loaded: CpuSample | undefined;
    let lastRound: CpuSample | undefined;
    const start = sample(pids, s.redis);
    const r = await rankOnCluster({
      client: asker, broker, partitions: s.partitions, graph: readTheGraph(s), tolerance: s.tolerance, log,
      onLoaded: () => (loaded = sample(pids, s.redis)),
      onRound: (summary) => {
        rounds.push(summary);
        lastRound = sample(pids, s.redis);
      },
    });
    loadAverage.push(load());
    const peakRssMiB = pids.map(peakRss);
    const end = await clusterStatus({ cluster: REDIS, clusterName: status.cluster });
    const moved = owners(end, s.partitions).some((o, p) => o !== owner[p]);
    const load_ = await cpuBetween(start, loaded!);
    const converge = await cpuBetween(loaded!, lastRound!);
    return {
      workers: n, loadSeconds: r3(r.loadSeconds), convergeSeconds: r3(r.convergeSeconds), seconds: r3(r.loadSeconds + r.convergeSeconds),
      rounds: r.converge.rounds, converged: r.converge.converged, l1: l1Of(s, r.scores), pages: r.pages, links: r.outlinks,
      ...roundFigures(rounds),
      crossWorker: {
        ...crossWorker(pushes, rounds, owner),
        expectedFraction: r3((n - 1) / n),
        how: 'exact: each push report gives the messages and bytes partition p sent to each q; clusterStatus gives the owner of p and q; counted when they differ',
        ...(moved ? { ownershipChanged: 'a partition changed owner during the run: counted with the owners at the start' } : {}),
      },
      ownerChanges: ownerChanges(status, end),
      partitionsPerWorker: Object.values(owner.reduce<Record<string, number>>((t, o) => ({ ...t, [o]: (t[o] ?? 0) + 1 }), {})),
      cpuSeconds: { load: { workers: load_.workers, client: load_.client, redis: load_.redis }, converge },
      peakRssMiB,
      loadAverage,
    };
  }, measureDisk ? async (scope) => void (disk = await storeBytes(scope.dataDir, s.partitions)) : undefined);
  return { ...result, ...(disk ? { storeBytes: disk } : {}) };
}

/**
 * Failover: `n` workers rank the graph; at round `killRound` one worker that is not the
 * leader is SIGKILLed. Seconds from the kill to every partition running again on a live
 * worker (polled every 100 ms through clusterStatus), and to the end of the metric rounds.
 */
async function failover(s: Setup, n: number, killRound: number) {
  return withCluster(s, n, 'failover', async ({ scope, workers, client, broker, status }) => {
    const victim = status.workers.find((w) => w.id !== status.leader?.worker)!;
    const proc = workers.processes.find((c) => c.pid === victim.pid)!;
    const killedPartitions = status.partitions.filter((p) => p.owner === victim.id).length;
    let killedAt: number | undefined;
    let ownedAgain: Promise<number> | undefined;
    let lastRoundAt = 0;
    const loadAverage = [load()];
    const r = await rankOnCluster({
      client, broker, partitions: s.partitions, graph: readTheGraph(s), tolerance: s.tolerance, log,
      onRound: (summary) => {
        lastRoundAt = Date.now();
        if (summary.round < killRound || killedAt !== undefined) return;
        killedAt = Date.now();
        proc.kill('SIGKILL');
        ownedAgain = allRunning(scope, s.partitions, n - 1, victim.id).then(() => (Date.now() - killedAt!) / 1000);
      },
    });
    loadAverage.push(load());
    const changes = ownerChanges(status, await clusterStatus({ cluster: REDIS, clusterName: scope.clusterName }));
    if (killedAt === undefined) throw new Error(`the metric converged in fewer than ${killRound} rounds: no kill happened (give a smaller --kill-round)`);
    const l1 = l1Of(s, r.scores);
    return {
      workers: n, leaseMs: s.leaseMs, killedAtRound: killRound, victim: 'a worker that is not the leader', killedPartitions,
      ownerChanges: changes,
      ownedAgainS: r3(await ownedAgain!), convergedS: r3((lastRoundAt - killedAt) / 1000),
      rounds: r.converge.rounds, converged: r.converge.converged, l1, exact: l1 !== null && l1 <= 1e-6,
      loadSeconds: r3(r.loadSeconds), convergeSeconds: r3(r.convergeSeconds), loadAverage,
    };
  });
}

/**
 * `npm run -s bench -- cluster --json`: the web index on a cluster, on this machine, over
 * Redis Streams (coordination and broker in the Redis at SHARDFLOW_REDIS_URL, default
 * 127.0.0.1:6379).
 *
 * - `oneProcess`: `rankGraph` in this process (every partition here), on a Redis Streams
 *   broker scope of its own.
 * - `workers`: for each count in `--workers`, that many `shardflow worker --web-index`
 *   processes (`startLocalWorkers`, one shared data dir) and a `rankOnCluster` client in this
 *   process. Per run: load and converge seconds, rounds, L1 to the reference
 *   (pagerank.tsv next to the graph), messages and payload bytes per round (mean, max; the
 *   first round and the mean of the later ones, and the mean per tenth of the run), the ones
 *   that went to a partition owned by another worker (`crossWorker`, exact), and CPU seconds
 *   (user + sys from /proc) of the workers, of this client and of the Redis server (INFO
 *   cpu: every client of that Redis, other jobs included) during the load and the rounds.
 *   The first count's stores are measured on disk (`storeBytes`: as the workers' SIGTERM left
 *   them, flushed, fully compacted). `ownerChanges`: lease epochs given during the job
 *   (after every partition ran on the n workers; in the failover, the killed worker's
 *   partitions count once each).
 * - `failover`: `--failover-workers` workers; one (not the leader) SIGKILLed at round
 *   `--kill-round`: seconds to every partition running again, and to the end of the rounds;
 *   the result's L1 (`exact`: <= 1e-6).
 * - `perLink`: what the projection in docs/cluster.md uses: CPU seconds per link per round
 *   (the first count's workers during the rounds, Redis apart), stored bytes per page and per
 *   link, payload bytes per link per round.
 * - `loadAverage`: the machine's 1, 5, 15 minute load averages at the start and the end.
 *
 * Args: `--graph DIR`, `--partitions N`, `--tolerance T` (bench/lib/rankOptions.ts: cnr-2000,
 * 16, 1e-6; smoke: polblogs, 4), `--workers` list (default `1,2,4`; smoke `1,2`), `--lease-ms`
 * (default the worker's, DEFAULT_LEASE_MS, 6 s; smoke 2000), `--failover-workers` (default 3; smoke 2), `--kill-round`
 * (default 10; smoke 3), `--parts` (default `one,workers,failover`: the parts to run; the
 * others say `notRun`). Redis unreachable: every part `skipped` with the reason (fails
 * under SHARDFLOW_REQUIRE_BROKERS=1), as bench/cluster-counter.ts and bench/broker.ts do.
 * @throws RangeError for a bad option
 */
export async function run(args: string[]): Promise<Record<string, unknown>> {
  const { options: o, dir, partitions, tolerance, file } = rankBenchOptions(args);
  const counts = o.string('--workers', '1,2,4', '1,2').split(',').map(Number);
  if (counts.some((n) => !Number.isInteger(n) || n < 1 || n > partitions)) throw new RangeError(`--workers needs a list of integers from 1 to the partitions (${partitions}), got ${o.string('--workers', '')}`);
  const leaseMs = o.number('--lease-ms', DEFAULT_LEASE_MS, 2000);
  const failoverWorkers = o.number('--failover-workers', 3, 2);
  const killRound = o.number('--kill-round', 10, 3);
  const parts = new Set(o.string('--parts', 'one,workers,failover').split(','));
  if ([...parts].some((p) => !['one', 'workers', 'failover'].includes(p))) throw new RangeError(`--parts needs a list of one, workers, failover; got ${o.string('--parts', '')}`);
  const params = { graph: dir.split('/').pop(), partitions, tolerance, parts: [...parts], workers: counts, leaseMs, failoverWorkers, killRound, broker: 'redis-streams', cpus: (await import('node:os')).cpus().length };
  const loadAverage = { start: load() };
  const unreachable = await redisUnreachable();
  if (unreachable !== undefined) {
    const skipped = { skipped: unreachable };
    return { smoke: o.smoke, params, loadAverage, oneProcess: skipped, workers: skipped, failover: skipped, perLink: skipped };
  }
  const reference = existsSync(file('pagerank.tsv')) ? new Map(await readScores(file('pagerank.tsv'))) : undefined;
  const redis = await redisCpu(REDIS);
  const s: Setup = { dir, file, partitions, tolerance, leaseMs, reference, redis };
  try {
    const notRun = { notRun: 'not in --parts' };
    const one = parts.has('one') ? await oneProcess(s) : undefined;
    process.stderr.write(`one process: ${JSON.stringify(one ?? notRun)}\n`);
    const byWorkers = [];
    for (const [i, n] of (parts.has('workers') ? counts : []).entries()) {
      const r = await onWorkers(s, n, i === 0);
      process.stderr.write(`${n} workers: ${JSON.stringify(r)}\n`);
      byWorkers.push({ ...r, overOneProcess: one ? r3(r.seconds / one.seconds) : null });
    }
    const f = parts.has('failover') ? await failover(s, failoverWorkers, killRound) : notRun;
    process.stderr.write(`failover: ${JSON.stringify(f)}\n`);
    const first = byWorkers[0];
    const linkRounds = first ? first.links * first.rounds : 0;
    const perLink = !first ? notRun : {
      from: `the ${first.workers}-worker run`,
      cpuSecondsPerLinkPerRound: { workers: first.cpuSeconds.converge.workers / linkRounds, redis: first.cpuSeconds.converge.redis / linkRounds, client: first.cpuSeconds.converge.client / linkRounds },
      cpuSecondsPerLinkLoad: { workers: first.cpuSeconds.load.workers / first.links, redis: first.cpuSeconds.load.redis / first.links },
      // Table files only (the data); the rest of a store dir is its logs, manifest and options, a fixed cost per store.
      storedBytesPerPage: first.storeBytes ? { flushed: r3(first.storeBytes.flushed.sst / first.pages), compacted: r3(first.storeBytes.compacted.sst / first.pages) } : null,
      storedBytesPerLink: first.storeBytes ? { flushed: r3(first.storeBytes.flushed.sst / first.links), compacted: r3(first.storeBytes.compacted.sst / first.links) } : null,
      // Table bytes before a full compaction over after it: what the versions and merge operands not compacted yet cost at that moment.
      spaceAmplification: first.storeBytes && first.storeBytes.compacted.sst > 0 ? r3(first.storeBytes.flushed.sst / first.storeBytes.compacted.sst) : null,
      nonTableBytesPerStore: first.storeBytes ? Math.round((first.storeBytes.compacted.all - first.storeBytes.compacted.sst) / partitions) : null,
      bytesPerLinkPerRound: { mean: r3(first.bytesPerRound.mean / first.links), first: r3(first.bytesPerRound.first / first.links), later: r3(first.bytesPerRound.laterMean / first.links) },
    };
    return { smoke: o.smoke, params, loadAverage: { ...loadAverage, end: load() }, oneProcess: one ?? notRun, workers: parts.has('workers') ? byWorkers : notRun, failover: f, perLink };
  } finally {
    await redis.close();
  }
}
