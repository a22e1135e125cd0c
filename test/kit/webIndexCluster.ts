import assert from 'node:assert/strict';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { clusterBrokerIdentity, clusterStatus, connectBroker, connectClusterClient, deleteBrokerScope, type Broker, type BrokerIdentity, type ClusterClient, type ClusterStatus } from '../../src/index.js';
import { MemoryBroker } from '../../src/runtime/brokers/index.js';
import { readGraph, readScores, type WebGraph } from '../../src/replay/graphFile.js';
import { l1Distance, rankGraph } from '../../src/jobs/rankGraph.js';
import { rankOnCluster, type ClusterRankOptions, type ClusterRankResult } from '../../src/jobs/clusterRank.js';
import { uniformWeights } from '../../src/actors/metrics/weights.js';
import { WEB_INDEX_STAGE } from '../../src/topology/clusterProtocol.js';
import { REDIS_URL, deleteKeys, skipWithoutRedis } from './cluster.js';
import { S3_BUCKET, s3Env, skipWithoutS3 } from './s3.js';
import { killWorkers, spawnWorkerProcess, until, type WorkerProcess } from './clusterRun.js';
import { memoryLogger, repoRoot, tempDir } from './datasets.js';

/** A graph of test/data with its reference scores and the counts a one-process run stores. */
export interface RankCase {
  readonly graph: WebGraph;
  readonly reference: Map<string, number>;
  readonly counts: { readonly pages: number; readonly outlinks: number; readonly backlinks: number };
}

const cases = new Map<string, Promise<RankCase>>();

/** Reads a graph folder and ranks it once in this process (memory broker): the counts a cluster run must equal. Cached per folder. */
export function rankCase(dir: string, partitions: number): Promise<RankCase> {
  const key = `${dir}/${partitions}`;
  let c = cases.get(key);
  if (!c) {
    c = (async () => {
      const graph = await readGraph(join(dir, 'pages.txt'), join(dir, 'links.tsv'));
      const reference = new Map(await readScores(join(dir, 'pagerank.tsv')));
      const d = tempDir('sf-wic-ref-');
      try {
        const r = await rankGraph({ graph, partitions, dataDir: d.dir, broker: new MemoryBroker(), weigh: uniformWeights, log: memoryLogger().log });
        return { graph, reference, counts: { pages: r.pages, outlinks: r.outlinks, backlinks: r.backlinks } };
      } finally {
        d.cleanup();
      }
    })();
    cases.set(key, c);
  }
  return c;
}

/**
 * A web-index cluster on this machine for a test: `shardflow worker --web-index` processes
 * (one shared data dir, this run's Redis key prefix and cluster name, broker scope of the
 * cluster) and a client in the test process.
 */
export class WebIndexCluster {
  readonly clusterName = `wic-${process.pid}-${Math.floor(Math.random() * 1e9).toString(36)}`;
  readonly keyPrefix = `sfc-wic-${process.pid}:`;
  readonly identity: BrokerIdentity;
  readonly workers: WorkerProcess[] = [];
  readonly #dir = tempDir('sf-wic-');
  // Promises, not values: two concurrent first calls must share one connection (a value set
  // after an await let both connect, and the one overwritten was never closed).
  #broker: Promise<Broker> | undefined;
  #client: Promise<ClusterClient> | undefined;

  /**
   * @param extraWorkerArgs more arguments of every worker (e.g. `--crawl …`)
   * @param ownDataDirs each worker gets a data dir of its own (`<dataDir>/<name>`), as on separate machines
   */
  constructor(readonly partitions: number, readonly leaseMs: number, readonly brokerSpec: string = REDIS_URL, readonly extraWorkerArgs: readonly string[] = [], readonly ownDataDirs = false) {
    this.identity = clusterBrokerIdentity(brokerSpec, this.clusterName);
  }

  get dataDir(): string {
    return this.#dir.dir;
  }

  /** The arguments of `shardflow worker --web-index` for worker `name`. */
  workerArgs(name: string): string[] {
    return [
      resolve(repoRoot, 'bin/shardflow.mjs'), 'worker', '--web-index', '--partitions', String(this.partitions),
      '--cluster', REDIS_URL, '--cluster-name', this.clusterName, '--key-prefix', this.keyPrefix, '--broker', this.brokerSpec,
      '--data-dir', this.ownDataDirs ? join(this.dataDir, name) : this.dataDir, '--name', name, '--lease-ms', String(this.leaseMs), '--json', ...this.extraWorkerArgs,
    ];
  }

  /** Starts worker `name` (`env` laid over this process's environment); resolves once it joined. */
  async startWorker(name: string, env: NodeJS.ProcessEnv = {}): Promise<WorkerProcess> {
    const w = spawnWorkerProcess(name, this.workerArgs(name), env);
    this.workers.push(w);
    await until(`worker ${name} to join (stderr: ${w.stderr.slice(-800)})`, async () => w.id !== undefined || (w.child.exitCode !== null && Promise.reject(new Error(`worker ${name} exited ${w.child.exitCode}: ${w.stderr.slice(-1500)}`))), 180_000);
    return w;
  }

  broker(): Promise<Broker> {
    this.#broker ??= connectBroker(this.identity);
    return this.#broker;
  }

  client(): Promise<ClusterClient> {
    this.#client ??= this.broker().then((broker) => connectClusterClient({ cluster: REDIS_URL, clusterName: this.clusterName, keyPrefix: this.keyPrefix, broker }));
    return this.#client;
  }

  async status(): Promise<ClusterStatus> {
    return clusterStatus({ cluster: REDIS_URL, clusterName: this.clusterName, keyPrefix: this.keyPrefix });
  }

  /** Resolves with the status once every partition runs on one of `live`. */
  allRunningOn(live: readonly WorkerProcess[], timeoutMs = 60_000): Promise<ClusterStatus> {
    const ids = new Set(live.map((w) => w.id));
    return until(`every partition running on ${live.map((w) => w.name).join(', ')}`, async () => {
      const s = await this.status();
      const units = s.partitions.filter((p) => p.stage === WEB_INDEX_STAGE);
      return units.length === this.partitions && units.every((p) => p.state === 'running' && ids.has(p.owner)) && s;
    }, timeoutMs);
  }

  /**
   * Ranks `c` on the cluster with a client in this process. A job still running after
   * `hangMs` (default 200 s) is stopped and rejected with the cluster's status and the last
   * rounds, so that a hang fails with what it waited for (and the workers' stderr, printed by
   * `withWebIndexCluster`) instead of the test's bare timeout. `broker` replaces the
   * cluster's broker for the load only (e.g. `holdLoadAfter`).
   */
  async rank(c: RankCase, options: Partial<Pick<ClusterRankOptions, 'onRound' | 'onLoaded' | 'job' | 'tolerance' | 'broker'>> & { hangMs?: number } = {}): Promise<ClusterRankResult> {
    const { hangMs = 200_000, ...rest } = options;
    const stop = new AbortController();
    const rounds: string[] = [];
    const timer = setTimeout(() => {
      void this.status().then(
        (s) => stop.abort(new Error(`the rank job did not end in ${hangMs} ms; last rounds ${rounds.slice(-3).join(' | ')}; partitions ${s.partitions.map((p) => `${p.unit} ${p.state} epoch ${p.epoch} owner ${p.owner ?? '-'}${p.reason ? ` (${p.reason})` : ''}`).join(', ')}`)),
        (err: unknown) => stop.abort(err),
      );
    }, hangMs);
    try {
      return await rankOnCluster({
        client: await this.client(), broker: await this.broker(), partitions: this.partitions, graph: c.graph, log: memoryLogger().log, tolerance: 1e-9, ...rest, signal: stop.signal,
        onRound: (r) => {
          rounds.push(`${r.round}: pushed ${r.pushed}, bound ${r.bound.toExponential(2)}`);
          rest.onRound?.(r);
        },
      });
    } finally {
      clearTimeout(timer);
    }
  }

  /** SIGTERMs every live worker and checks each exits 0. */
  async stopAll(): Promise<void> {
    const live = this.workers.filter((w) => w.child.exitCode === null && w.child.signalCode === null);
    for (const w of live) w.child.kill('SIGTERM');
    for (const w of live) assert.equal((await w.exited).code, 0, `worker ${w.name} exits 0 on SIGTERM (stderr: ${w.stderr.slice(-1500)})`);
  }

  /** Kills what still runs and removes this run's keys, broker scope and data dir. */
  async close(): Promise<void> {
    await killWorkers(this.workers);
    await (await this.#client?.catch(() => undefined))?.close();
    await (await this.#broker?.catch(() => undefined))?.close();
    await deleteBrokerScope(this.identity).catch(() => undefined);
    await deleteKeys(`${this.keyPrefix}${this.clusterName}:`);
    this.#dir.cleanup();
  }
}

/** Asserts a cluster run's result: converged, L1 <= 1e-6 to the reference, the one-process counts. */
export function assertClusterRank(result: Pick<ClusterRankResult, 'scores' | 'pages' | 'outlinks' | 'backlinks'> & { readonly converge: { readonly converged: boolean } }, c: RankCase): void {
  assert.ok(result.converge.converged, 'converged');
  const l1 = l1Distance(new Map(result.scores), c.reference);
  assert.ok(l1 <= 1e-6, `L1 ${l1} to the reference`);
  assert.deepEqual({ pages: result.pages, outlinks: result.outlinks, backlinks: result.backlinks }, c.counts, 'the counts of a one-process run');
}

/** Runs `body` on a fresh {@link WebIndexCluster}; prints the workers' stderr on failure; always runs `beforeClose` (stop the clients that use the cluster), then cleans up. */
export async function withWebIndexCluster(t: import('node:test').TestContext, o: { partitions: number; leaseMs: number; broker?: string; workerArgs?: readonly string[]; ownDataDirs?: boolean }, body: (c: WebIndexCluster) => Promise<void>, beforeClose?: () => Promise<void>): Promise<void> {
  const c = new WebIndexCluster(o.partitions, o.leaseMs, o.broker, o.workerArgs, o.ownDataDirs);
  try {
    await body(c);
  } catch (err) {
    for (const w of c.workers) t.diagnostic(`${w.name} stderr: ${w.stderr.slice(-2000)}`);
    throw err;
  } finally {
    await beforeClose?.();
    await c.close();
  }
}

/** A {@link WebIndexCluster} whose workers checkpoint into the S3 server (or a directory), as `withCheckpointedWebIndexCluster` starts it. */
export interface CheckpointedWebIndexCluster {
  readonly c: WebIndexCluster;
  /** w1, w2, w3, every partition running on them. */
  readonly ws: WorkerProcess[];
  /** The checkpoint store's URL (`s3://<bucket>/<prefix>`, or `file:///<dir>`); the partitions' keys are `<clusterName>/index/p<i>` under it. */
  readonly checkpointsUrl: string;
  /** The store's prefix in the bucket (S3), its folder (a directory). */
  readonly prefix: string;
}

/**
 * Three `shardflow worker --web-index` processes, each with a data dir of its own (nothing
 * shared but Redis, which coordinates, the broker (`broker`, default Redis Streams) and the
 * S3 server, which keeps the checkpoints every 5 s), as on three machines. Skips without
 * Redis or the S3 server (fails under SHARDFLOW_REQUIRE_BROKERS=1). `env[i]`: variables of
 * worker i (test hooks). `store: 'directory'`: a folder of this machine instead of S3 (a
 * directory store on the workers' filesystem: WAL tails are linked, not copied).
 */
export async function withCheckpointedWebIndexCluster(
  t: import('node:test').TestContext,
  o: { partitions: number; leaseMs: number; broker?: string; env?: ReadonlyArray<NodeJS.ProcessEnv>; store?: 's3' | 'directory' },
  body: (k: CheckpointedWebIndexCluster) => Promise<void>,
): Promise<void> {
  if (await skipWithoutRedis(t)) return;
  if (o.store === 'directory') {
    const folder = tempDir('shardflow-wi-checkpoints-');
    try {
      await run(folder.dir, pathToFileURL(folder.dir).href);
    } finally {
      folder.cleanup();
    }
    return;
  }
  if (await skipWithoutS3(t)) return;
  for (const [k, v] of Object.entries(s3Env())) process.env[k] ??= v; // the workers inherit the AWS environment
  const prefix = `test-wi-${process.pid}-${Math.floor(Math.random() * 1e9).toString(36)}`;
  await run(prefix, `s3://${S3_BUCKET}/${prefix}`);
  async function run(prefix: string, checkpointsUrl: string): Promise<void> {
    const workerArgs = ['--checkpoints', checkpointsUrl, '--checkpoint-interval-ms', '5000'];
    await withWebIndexCluster(t, { partitions: o.partitions, leaseMs: o.leaseMs, workerArgs, ownDataDirs: true, ...(o.broker ? { broker: o.broker } : {}) }, async (c) => {
      const ws: WorkerProcess[] = [];
      for (const [i, name] of ['w1', 'w2', 'w3'].entries()) ws.push(await c.startWorker(name, o.env?.[i] ?? {}));
      await c.allRunningOn(ws);
      await body({ c, ws, checkpointsUrl, prefix });
    });
  }
}

/** The `restored` events of the workers, as `<worker> <unit> <reason>`. */
export function restoresOf(ws: readonly WorkerProcess[]): string[] {
  return ws.flatMap((w) => w.events.flatMap(({ event: e }) => (e.type === 'restored' ? [`${w.name} ${e.unit}@${e.sequence}${e.walChunks > 0 ? ` (+${e.walChunks} WAL tails)` : ''} ${e.reason}`] : [])));
}
