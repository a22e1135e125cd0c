// The web index's checkpoints on worker processes (bench/checkpoint.ts, `webIndex*` fields;
// docs/checkpoints.md, "Figures"): the same rank job on workers without checkpoints and with
// them (a directory store, and S3), the checkpoints each partition put, their restores, and
// the moves of partitions between workers with their own data dirs (a join, a SIGTERM, a SIGKILL).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { stageCheckpointKey, type ClusterClient, type WorkerEvent } from '../../src/index.js';
import { CheckpointFileCache, openCheckpointStore } from '../../src/storage/index.js';
import { rankOnCluster } from '../../src/jobs/clusterRank.js';
import { l1Distance } from '../../src/jobs/rankGraph.js';
import { WEB_INDEX_STAGE } from '../../src/topology/clusterProtocol.js';
import type { WebGraph } from '../../src/replay/graphFile.js';
import { S3_BUCKET, s3Env } from '../../test/kit/s3.js';
import { memoryLogger } from '../../test/kit/datasets.js';
import { until, type WorkerProcess } from '../../test/kit/clusterRun.js';
import { WebIndexCluster } from '../../test/kit/webIndexCluster.js';

/** What the web-index part measures on (bench/checkpoint.ts parses it from its arguments). */
export interface WebIndexBenchSetup {
  readonly graph: WebGraph;
  /** The graph folder's name (for the result line). */
  readonly graphName: string;
  /** Reference scores (pagerank.tsv), when the folder has them: the runs' L1 to them. */
  readonly reference: ReadonlyMap<string, number> | undefined;
  readonly partitions: number;
  readonly tolerance: number;
  /** Worker processes of each rank run (the moves add a third, then stop two). */
  readonly workers: number;
  readonly leaseMs: number;
  /** `--checkpoint-interval-ms` of the workers with checkpoints (undefined: the worker's default). */
  readonly checkpointIntervalMs: number | undefined;
  /** Warm standbys per partition of the workers with checkpoints (`--standbys`; 0: none). */
  readonly standbys: number;
  /** The checkpoint stores of the runs with checkpoints, in order: `file` and/or `s3`. */
  readonly stores: ReadonlyArray<'file' | 's3'>;
  /** A hang bound per rank job, ms. */
  readonly hangMs: number;
}

type Spread = { readonly n: number; readonly min: number; readonly median: number; readonly max: number; readonly total: number };
type Checkpointed = Extract<WorkerEvent, { type: 'checkpointed' }>;
type Restored = Extract<WorkerEvent, { type: 'restored' }>;

const r3 = (x: number): number => Math.round(x * 1000) / 1000;
const load = (): number[] => loadavg().map((x) => Math.round(x * 100) / 100);

/** Count, min, median (the lower middle), max and total of `xs`, each rounded to 3 decimals (all 0 when empty). */
export function spread(xs: readonly number[]): Spread {
  if (xs.length === 0) return { n: 0, min: 0, median: 0, max: 0, total: 0 };
  const s = [...xs].sort((a, b) => a - b);
  return { n: s.length, min: r3(s[0]!), median: r3(s[Math.floor((s.length - 1) / 2)]!), max: r3(s[s.length - 1]!), total: r3(s.reduce((a, b) => a + b, 0)) };
}

/** The events of type `type` of the workers, with the worker's name and the wall time (ms) each was printed. */
function eventsOf<T extends WorkerEvent['type']>(ws: readonly WorkerProcess[], type: T): Array<{ w: string; at: number; e: Extract<WorkerEvent, { type: T }> }> {
  return ws.flatMap((w) => w.events.filter(({ event }) => event.type === type).map(({ event, at }) => ({ w: w.name, at, e: event as Extract<WorkerEvent, { type: T }> })));
}

/** Partition number of a unit `index/<p>`. */
const partitionOf = (unit: string): number => Number(unit.slice(unit.lastIndexOf('/') + 1));

/**
 * Asks every partition `{ kind: 'flow' }` (a read its host answers at once, nothing held for
 * a checkpoint), back to back with `gapMs` between, and keeps when each answer came: the
 * partition serves whenever an answer comes. A move's "serving" is the first answer after
 * the old owner's release (or the kill): an ask sent meanwhile waits in the broker for the
 * next owner.
 */
function readProbe(client: ClusterClient, partitions: number, gapMs = 50): { answers: number[][]; errors: string[]; stop: () => Promise<void> } {
  const answers: number[][] = Array.from({ length: partitions }, () => []);
  const errors: string[] = [];
  let stopped = false;
  const loops = answers.map(async (times, p) => {
    while (!stopped) {
      try {
        await client.ask(WEB_INDEX_STAGE, p, { kind: 'flow' }, { timeoutMs: 120_000 });
        times.push(Date.now());
      } catch (err) {
        if (!stopped) errors.push(`p${p}: ${(err as Error).message}`);
      }
      await new Promise((r) => setTimeout(r, gapMs));
    }
  });
  return {
    answers,
    errors,
    async stop() {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

/**
 * Waits (up to `timeoutMs`) until each of `partitions` answered a read at or after `since`:
 * an ask in flight to a killed owner is answered only once the broker hands it to the next
 * owner. Those still without one are reported as null by `servingAfter`.
 */
async function answeredSince(answers: readonly number[][], partitions: readonly number[], since: number, timeoutMs = 60_000): Promise<void> {
  await until('reads answered', async () => partitions.every((p) => answers[p]!.some((a) => a >= since)), timeoutMs).catch(() => undefined);
}

/** The first answer of partition p at or after `since` (ms), minus `since`, in seconds; null without one. */
function servingAfter(answers: readonly number[][], p: number, since: number): number | null {
  const t = answers[p]!.find((a) => a >= since);
  return t === undefined ? null : r3((t - since) / 1000);
}

interface RankRun {
  readonly seconds: number;
  readonly loadSeconds: number;
  readonly convergeSeconds: number;
  readonly rounds: number;
  readonly converged: boolean;
  readonly l1: number | null;
  readonly loadAverage: number[][];
  /**
   * Partitions fenced during the run (`fenced` events: a lease that ran out, its partition
   * stopped and acquired again with a new epoch, a whole put after): a busy worker whose
   * renewals are late. They cost the run seconds, so a ratio between runs with and without
   * them compares more than checkpoints.
   */
  readonly partitionsFenced: number;
}

/**
 * Waits until every partition runs on the `n` live workers, each holding at least
 * floor(partitions / n) (the leader moves a few at a time after a join).
 */
async function balanced(c: WebIndexCluster, ws: readonly WorkerProcess[], timeoutMs = 300_000) {
  const ids = new Set(ws.map((w) => w.id));
  let last = '';
  try {
    return await until(`every partition running, balanced over ${ws.map((w) => w.name).join(', ')}`, async () => {
      const s = await c.status();
      const units = s.partitions.filter((p) => p.stage === WEB_INDEX_STAGE);
      last = units.map((p) => `${p.unit} ${p.state} owner ${ws.find((w) => w.id === p.owner)?.name ?? p.owner ?? '-'}${p.reason ? ` (${p.reason})` : ''}`).join(', ');
      const ok = units.length === c.partitions && units.every((p) => p.state === 'running' && ids.has(p.owner)) &&
        ws.every((w) => units.filter((p) => p.owner === w.id).length >= Math.floor(c.partitions / ws.length));
      return ok && s;
    }, timeoutMs);
  } catch (err) {
    throw new Error(`${(err as Error).message}; partitions: ${last}; workers' stderr: ${c.workers.map((w) => `${w.name}: ${w.stderr.slice(-1500)}`).join(' | ')}`);
  }
}

/**
 * Ranks the graph on `c`'s workers with a client in this process.
 * @returns the run's figures, and the wall times (ms) of its start, of the end of its load and of its end
 * @throws Error when the job does not end within `s.hangMs`
 */
/** A round slower than this (ms) prints the workers' stderr (`rank`). */
const STALL_MS = 120_000;

async function rank(s: WebIndexBenchSetup, c: WebIndexCluster): Promise<{ run: RankRun; from: number; loadedAt: number; to: number }> {
  const loadAverage = [load()];
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(new Error(`the rank job did not end in ${s.hangMs} ms`)), s.hangMs);
  const from = Date.now();
  let loadedAt = from;
  // A round that takes over STALL_MS (after the load) prints the workers' last stderr once, so
  // that a stalled run says what its workers were doing while it can still be seen.
  let lastRound = 0;
  let dumped = false;
  const stall = setInterval(() => {
    if (dumped || lastRound === 0 || Date.now() - lastRound < STALL_MS) return;
    dumped = true;
    process.stderr.write(`no round for ${STALL_MS / 1000} s; the workers' stderr:\n`);
    for (const w of c.workers) process.stderr.write(`--- ${w.name}:\n${w.stderr.slice(-6000)}\n`);
  }, 5_000);
  try {
    const r = await rankOnCluster({
      client: await c.client(), broker: await c.broker(), partitions: s.partitions, graph: s.graph, tolerance: s.tolerance, log: memoryLogger().log, signal: stop.signal,
      onLoaded: () => (loadedAt = lastRound = Date.now()),
      onRound: (r) => {
        lastRound = Date.now();
        if (r.round % 10 === 0) process.stderr.write(`round ${r.round}: ${((Date.now() - from) / 1000).toFixed(1)} s, load average ${load().join(' ')}\n`);
      },
    });
    loadAverage.push(load());
    const to = Date.now();
    const run = {
      seconds: r3(r.loadSeconds + r.convergeSeconds), loadSeconds: r3(r.loadSeconds), convergeSeconds: r3(r.convergeSeconds),
      rounds: r.converge.rounds, converged: r.converge.converged, l1: s.reference ? l1Distance(new Map(r.scores), s.reference) : null, loadAverage,
      partitionsFenced: eventsOf(c.workers, 'fenced').filter((x) => x.at >= from && x.at <= to).length,
    };
    return { run, from, loadedAt, to };
  } finally {
    clearTimeout(timer);
    clearInterval(stall);
  }
}

/** Where the run's checkpoints go, and how to remove them after. */
interface StoreChoice {
  readonly url: string;
  readonly dispose: (clusterName: string) => Promise<void>;
}

function storeChoice(kind: 'file' | 's3'): StoreChoice {
  if (kind === 'file') {
    const dir = mkdtempSync(join(tmpdir(), 'sf-bench-wi-ckpt-'));
    return { url: pathToFileURL(dir).href, dispose: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const env = s3Env();
  for (const [k, v] of Object.entries(env)) process.env[k] ??= v; // the workers inherit the AWS environment
  const url = `s3://${S3_BUCKET}/bench-wi-${process.pid}-${randomBytes(3).toString('hex')}`;
  return {
    url,
    async dispose(clusterName) {
      const store = openCheckpointStore(url, { env });
      try {
        // Every partition's checkpoints, 16 keys at most: the bucket keeps nothing of the run.
        for (let p = 0; p < 4096; p++) {
          const key = stageCheckpointKey(clusterName, WEB_INDEX_STAGE, p);
          if (!(await store.latest(key))) break;
          await store.remove(key);
        }
      } finally {
        await store.close();
      }
    },
  };
}

/**
 * The checkpoints of the run as the workers reported them (`checkpointed` events), split into
 * the rank's load, its rounds, and the hand-backs after it: puts, their seconds (the local
 * RocksDB checkpoint; hashing and storing), bytes stored by each put, and puts per partition
 * per round.
 */
function putFigures(ws: readonly WorkerProcess[], from: number, loadedAt: number, to: number, rounds: number, partitions: number) {
  const puts = eventsOf(ws, 'checkpointed');
  const phase = (a: number, b: number) => {
    const ps = puts.filter((x) => x.at >= a && x.at < b).map((x) => x.e);
    return {
      puts: ps.length,
      // Puts that stored only the WAL's new bytes (docs/checkpoints.md, "WAL tail puts").
      walTailPuts: ps.filter((e) => e.walTail).length,
      // Objects the puts' manifests were stored in: one each, or one per group commit (docs/checkpoints.md, "Group commits").
      manifestObjects: Math.round(ps.reduce((t, e) => t + 1 / (e.groupedManifests ?? 1), 0)),
      checkpointSeconds: spread(ps.map((e) => e.checkpointSeconds)),
      uploadSeconds: spread(ps.map((e) => e.uploadSeconds)),
      uploadedBytes: spread(ps.map((e) => e.uploadedBytes)),
      uploadedFiles: spread(ps.map((e) => e.uploadedFiles)),
      // The share of the wall time the puts of one partition took, summed over the partitions (2 cores: above 2 they queue).
      busyPartitionSecondsPerSecond: b > a ? r3(ps.reduce((t, e) => t + e.checkpointSeconds + e.uploadSeconds, 0) / ((b - a) / 1000)) : 0,
    };
  };
  const load_ = phase(from, loadedAt);
  const roundsPhase = phase(loadedAt, to);
  // What the warm standbys fetched during the rank (one `warmed` event per unit and pass that fetched something).
  const warms = eventsOf(ws, 'warmed').filter((x) => x.at >= from && x.at < to).map((x) => x.e);
  const standbyWarms = { warms: warms.length, fetchedFiles: warms.reduce((t, e) => t + e.fetchedFiles, 0), fetchedBytes: warms.reduce((t, e) => t + e.fetchedBytes, 0), seconds: spread(warms.map((e) => e.seconds)) };
  return { load: load_, rounds: { ...roundsPhase, putsPerPartitionPerRound: rounds > 0 ? r3(roundsPhase.puts / partitions / rounds) : 0 }, standbyWarms };
}

/** One rank run on workers with checkpoints in `kind`, then (`moves`) the checkpoint sizes, restores and moves on its state. */
async function checkpointedRun(s: WebIndexBenchSetup, kind: 'file' | 's3', moves: boolean) {
  const store = storeChoice(kind);
  const args = [
    '--checkpoints', store.url, ...(s.checkpointIntervalMs !== undefined ? ['--checkpoint-interval-ms', String(s.checkpointIntervalMs)] : []),
    ...(s.standbys > 0 ? ['--standbys', String(s.standbys)] : []),
  ];
  const c = new WebIndexCluster(s.partitions, s.leaseMs, undefined, args, true);
  try {
    const ws: WorkerProcess[] = [];
    for (let i = 1; i <= s.workers; i++) ws.push(await c.startWorker(`w${i}`));
    await balanced(c, ws);
    const { run: ranked, from, loadedAt, to } = await rank(s, c);
    const run = { ...ranked, checkpoints: putFigures(ws, from, loadedAt, to, ranked.rounds, s.partitions) };
    // Before the moves, which may fail on an overloaded machine (a worker that does not join in time).
    process.stderr.write(`web index, rank with checkpoints in ${kind}: ${JSON.stringify(run)}\n`);
    if (!moves) {
      await c.stopAll();
      return { run };
    }
    const state = await checkpointState(s, c, store.url);
    const moved = await moveFigures(s, c, ws);
    await c.stopAll();
    return { run, state, moves: moved };
  } finally {
    await c.close();
    await store.dispose(c.clusterName).catch(() => undefined);
  }
}

/**
 * The latest checkpoint of each partition after the rank (bytes, files), and a restore of
 * each into a new folder in this process (fetch, check every file, rename): seconds.
 */
async function checkpointState(s: WebIndexBenchSetup, c: WebIndexCluster, url: string) {
  const store = openCheckpointStore(url, { env: s3Env() });
  const dir = mkdtempSync(join(tmpdir(), 'sf-bench-wi-restore-'));
  try {
    const bytes: number[] = [];
    const files: number[] = [];
    const restoreSeconds: number[] = [];
    const warmSeconds: number[] = [];
    const warmRestoreSeconds: number[] = [];
    const warmCachedShare: number[] = [];
    const cache = new CheckpointFileCache(join(dir, 'cache'));
    for (let p = 0; p < s.partitions; p++) {
      const key = stageCheckpointKey(c.clusterName, WEB_INDEX_STAGE, p);
      const latest = await store.latest(key);
      if (!latest) throw new Error(`partition ${p} has no checkpoint after the rank (${key})`);
      bytes.push(latest.bytes);
      files.push(latest.files.length);
      const restored = await store.restore(key, join(dir, `p${p}`), { sequence: latest.sequence });
      restoreSeconds.push(restored.seconds);
      rmSync(join(dir, `p${p}`), { recursive: true, force: true });
      // The same checkpoint restored by a warm standby: its files fetched into a cache first
      // (as a standby's passes do while the owner runs), then the restore takes them from it.
      const warmed = await store.warm(key, cache);
      if (warmed?.manifest.sequence !== latest.sequence) continue; // a checkpoint made meanwhile (none should be: the rank ended)
      warmSeconds.push(warmed.seconds);
      const fromCache = await store.restore(key, join(dir, `p${p}`), { sequence: latest.sequence, cache });
      warmRestoreSeconds.push(fromCache.seconds);
      warmCachedShare.push(r3(fromCache.cachedBytes / Math.max(1, fromCache.bytes)));
      rmSync(join(dir, `p${p}`), { recursive: true, force: true });
    }
    return {
      bytes: spread(bytes), files: spread(files), restoreSeconds: spread(restoreSeconds), restoreMiBPerSecond: r3(bytes.reduce((a, b) => a + b, 0) / 2 ** 20 / restoreSeconds.reduce((a, b) => a + b, 0)),
      warm: { what: 'each latest checkpoint warmed into a cache, then restored from it (a warm standby\'s crash move)', warmSeconds: spread(warmSeconds), restoreSeconds: spread(warmRestoreSeconds), cachedShareOfBytes: spread(warmCachedShare) },
    };
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Moves on the ranked state (each worker its own data dir; the partitions travel through the
 * checkpoints): a worker joins (the leader moves it its share, a planned hand-back each), the
 * first worker leaves with SIGTERM (hand-backs), then one more is SIGKILLed (its partitions
 * restored by the last one). Per moved partition: seconds from the old owner's `released`
 * (or the kill, or the lease's expiry in Redis) to the next owner's `started`, and to the
 * first answer to a read asked of it (`readProbe`); its restore's seconds; the hand-back's
 * last checkpoint.
 */
async function moveFigures(s: WebIndexBenchSetup, c: WebIndexCluster, ws: WorkerProcess[]) {
  const probe = readProbe(await c.client(), s.partitions);
  try {
    const planned = async (what: string, act: () => Promise<WorkerProcess[]>) => {
      const since = Date.now();
      const live = await act();
      await balanced(c, live);
      const released = eventsOf(ws, 'released').filter((x) => x.at >= since);
      await answeredSince(probe.answers, released.map((x) => partitionOf(x.e.unit)), since);
      const moves = released.map(({ w, at, e }) => {
        const started = eventsOf(ws, 'started').find((x) => x.e.unit === e.unit && x.at >= at);
        const restored = eventsOf(ws, 'restored').find((x) => x.e.unit === e.unit && x.at >= at)?.e;
        const last = eventsOf(ws, 'checkpointed').filter((x) => x.w === w && x.e.unit === e.unit && x.at <= at).pop()?.e;
        return {
          releaseToStarted: started ? r3((started.at - at) / 1000) : null,
          releaseToServing: servingAfter(probe.answers, partitionOf(e.unit), at),
          restoreSeconds: restored?.seconds ?? null,
          restoreReason: restored?.reason ?? null,
          lastCheckpoint: last ? { seconds: r3(last.checkpointSeconds + last.uploadSeconds), uploadedBytes: last.uploadedBytes } : null,
        };
      });
      return {
        what, moved: moves.length,
        releaseToStartedSeconds: spread(moves.flatMap((m) => (m.releaseToStarted === null ? [] : [m.releaseToStarted]))),
        releaseToServingSeconds: spread(moves.flatMap((m) => (m.releaseToServing === null ? [] : [m.releaseToServing]))),
        restoreSeconds: spread(moves.flatMap((m) => (m.restoreSeconds === null ? [] : [m.restoreSeconds]))),
        notRestored: moves.filter((m) => m.restoreReason === null).length,
        lastCheckpointSeconds: spread(moves.flatMap((m) => (m.lastCheckpoint ? [m.lastCheckpoint.seconds] : []))),
        lastCheckpointUploadedBytes: spread(moves.flatMap((m) => (m.lastCheckpoint ? [m.lastCheckpoint.uploadedBytes] : []))),
        loadAverage: load(),
      };
    };
    const joined = await planned('a worker joins: the leader moves it its share (planned hand-backs)', async () => {
      ws.push(await c.startWorker(`w${ws.length + 1}`));
      return ws.slice();
    });
    const first = ws[0]!;
    const left = await planned('a worker leaves with SIGTERM (planned hand-backs of all its partitions)', async () => {
      first.child.kill('SIGTERM');
      const { code } = await first.exited;
      if (code !== 0) throw new Error(`worker ${first.name} exited ${code} after SIGTERM: ${first.stderr.slice(-1500)}`);
      return ws.filter((w) => w !== first);
    });
    const live = ws.filter((w) => w !== first);
    const leader = (await c.status()).leader?.worker;
    const victim = live.find((w) => w.id !== leader) ?? live[0]!;
    const survivors = live.filter((w) => w !== victim);
    const killedAt = Date.now();
    victim.child.kill('SIGKILL');
    const status = await c.status();
    const readAt = Date.now();
    const victimUnits = status.partitions.filter((p) => p.stage === WEB_INDEX_STAGE && p.owner === victim.id);
    const expiry = new Map(victimUnits.map((p) => [p.unit, readAt + (p.leaseMsLeft ?? 0)]));
    await balanced(c, survivors);
    await answeredSince(probe.answers, victimUnits.map((u) => u.partition), killedAt);
    const crash = victimUnits.map((u) => {
      const started = eventsOf(survivors, 'started').find((x) => x.e.unit === u.unit && x.at >= killedAt);
      const restored = eventsOf(survivors, 'restored').find((x) => x.e.unit === u.unit && x.at >= killedAt)?.e as Restored | undefined;
      return {
        killToStarted: started ? (started.at - killedAt) / 1000 : null,
        expiryToStarted: started ? (started.at - expiry.get(u.unit)!) / 1000 : null,
        killToServing: servingAfter(probe.answers, u.partition, killedAt),
        restoreSeconds: restored?.seconds ?? null,
        cachedBytes: restored?.cachedBytes ?? null,
        restoredBytes: restored?.bytes ?? null,
      };
    });
    const keep = <K extends keyof (typeof crash)[number]>(k: K) => crash.flatMap((m) => (m[k] === null ? [] : [m[k] as number]));
    return {
      join: joined,
      sigterm: left,
      sigkill: {
        what: 'a worker is SIGKILLed: its leases run out in Redis, the others take them and restore the last checkpoints',
        moved: crash.length,
        killToStartedSeconds: spread(keep('killToStarted')),
        leaseExpiryToStartedSeconds: spread(keep('expiryToStarted')),
        killToServingSeconds: spread(keep('killToServing')),
        notServedWithin60s: crash.filter((m) => m.killToServing === null).length,
        restoreSeconds: spread(keep('restoreSeconds')),
        notRestored: crash.filter((m) => m.restoreSeconds === null).length,
        standbys: s.standbys,
        restoredBytes: spread(keep('restoredBytes')),
        cachedBytes: spread(keep('cachedBytes')),
        leaseMs: s.leaseMs,
        loadAverage: load(),
      },
      readErrors: probe.errors.slice(0, 5),
      readErrorCount: probe.errors.length,
    };
  } finally {
    await probe.stop();
  }
}

/** The rank job on workers without checkpoints (one shared data dir, as such workers need). */
async function uncheckpointedRun(s: WebIndexBenchSetup): Promise<RankRun> {
  const c = new WebIndexCluster(s.partitions, s.leaseMs);
  try {
    const ws: WorkerProcess[] = [];
    for (let i = 1; i <= s.workers; i++) ws.push(await c.startWorker(`w${i}`));
    await balanced(c, ws);
    const { run } = await rank(s, c);
    await c.stopAll();
    return run;
  } finally {
    await c.close();
  }
}

/**
 * The web-index figures of bench/checkpoint.ts: the rank job without checkpoints, then with
 * them in each store of `s.stores` (the first of them also measures the checkpoint state and
 * the moves), then without again, in one run.
 * @returns `webIndexCost` (the runs; `none` is the mean of the two without, both kept in its
 *   `runs`; each checkpointed run's seconds over that mean), `webIndexCheckpoints`
 *   (per partition bytes, files, restore seconds; the puts of the rank), `webIndexMoves`
 * @throws Error when a rank job does not converge within `s.hangMs`, or a worker fails
 */
export async function webIndexCheckpointBench(s: WebIndexBenchSetup): Promise<{ webIndexCost: Record<string, unknown>; webIndexCheckpoints: Record<string, unknown>; webIndexMoves: Record<string, unknown> }> {
  const loadAverage = { start: load() };
  const before = await uncheckpointedRun(s);
  process.stderr.write(`web index, no checkpoints (first): ${JSON.stringify(before)}\n`);
  const runs: Array<{ kind: string; r: Awaited<ReturnType<typeof checkpointedRun>> }> = [];
  for (const [i, kind] of s.stores.entries()) {
    const r = await checkpointedRun(s, kind, i === 0);
    process.stderr.write(`web index, checkpoints in ${kind}: ${JSON.stringify(r)}\n`);
    runs.push({ kind, r });
  }
  // The run without checkpoints again, last: the first run of a bench has been the slower one
  // (its load 42 to 56 s against 32 to 44 s with checkpoints just after, in 3 of 4 runs of
  // session 19), so each ratio is over the mean of a run before and a run after.
  const after = await uncheckpointedRun(s);
  process.stderr.write(`web index, no checkpoints (last): ${JSON.stringify(after)}\n`);
  const mean = (f: (x: typeof before) => number) => r3((f(before) + f(after)) / 2);
  const none = {
    seconds: mean((x) => x.seconds), loadSeconds: mean((x) => x.loadSeconds), convergeSeconds: mean((x) => x.convergeSeconds),
    partitionsFenced: before.partitionsFenced + after.partitionsFenced, runs: [before, after],
  };
  const withStores: Record<string, unknown> = {};
  for (const { kind, r } of runs) {
    withStores[kind] = { ...r.run, overNone: r3(r.run.seconds / none.seconds), roundsOverNone: r3(r.run.convergeSeconds / none.convergeSeconds) };
  }
  const first = runs[0]?.r;
  const params = { graph: s.graphName, partitions: s.partitions, workers: s.workers, tolerance: s.tolerance, leaseMs: s.leaseMs, checkpointIntervalMs: s.checkpointIntervalMs ?? 'the worker default (30000)', stores: s.stores };
  return {
    webIndexCost: { params, loadAverage: { ...loadAverage, end: load() }, none, ...withStores, target: 'at most 1.1 (10% more time) with checkpoints' },
    webIndexCheckpoints: first ? { store: s.stores[0], afterRank: first.state, puts: first.run.checkpoints } : { notRun: 'no checkpoint store given' },
    webIndexMoves: first?.moves ? { store: s.stores[0], ...first.moves } : { notRun: 'no checkpoint store given' },
  };
}
