import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { join, resolve } from 'node:path';
import {
  RedisStreamsBroker, clusterBrokerIdentity, stageCheckpointKey, clusterStatus, connectBroker, connectClusterClient, deleteBrokerScope, openExternalProducer,
  type Broker, type ClusterClient, type SentStream, type BrokerIdentity, type ClusterStatus, type DeadLetter, type TopologyProducer, type WorkerEvent,
} from '../../src/index.js';
import { partitionId } from '../../src/runtime/ids.js';
import { StreamColumnFamilies, stageColumnFamilies } from '../../src/runtime/stream/reserved.js';
import { topic } from '../../src/runtime/topics.js';
import { openCheckpointStore, Store } from '../../src/storage/index.js';
import { pathToFileURL } from 'node:url';
import { REDIS_URL, clusterClickTopology, deleteKeys, type Click } from './cluster.js';
import { repoRoot, tempDir } from './datasets.js';

/** One worker process (test/kit/clusterWorker.ts) and what it printed. */
export interface WorkerProcess {
  readonly name: string;
  readonly child: ChildProcess;
  /** Its events, as printed, with the wall time of each. */
  readonly events: Array<{ readonly event: WorkerEvent; readonly at: number }>;
  /** Its member id, once joined. */
  id: string | undefined;
  stderr: string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Until `probe` gives a value other than undefined/false, every 100 ms; throws naming `what` after `timeoutMs`. */
export async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 45_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Spawns `node <args>` (a worker printing `--json` events on stdout) from the repository root
 * and collects its events, member id and stderr as they come. `env`: variables laid over
 * this process's environment (test hooks such as `SHARDFLOW_CHECKPOINT_HOLD_MANIFEST`).
 */
export function spawnWorkerProcess(name: string, args: readonly string[], env: NodeJS.ProcessEnv = {}): WorkerProcess {
  const child = spawn(process.execPath, args, { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  const w: WorkerProcess = {
    name, child, events: [], id: undefined, stderr: '',
    exited: new Promise((r) => child.on('exit', (code, signal) => r({ code, signal }))),
  };
  let pending = '';
  child.stdout!.on('data', (d: Buffer) => {
    const lines = (pending + d.toString('utf8')).split('\n');
    pending = lines.pop()!;
    for (const l of lines) {
      const o = JSON.parse(l) as { event?: WorkerEvent; at: number };
      if (!o.event) continue;
      w.events.push({ event: o.event, at: o.at });
      if (o.event.type === 'joined') w.id = o.event.worker;
    }
  });
  child.stderr!.on('data', (d: Buffer) => (w.stderr += d.toString('utf8')));
  return w;
}

/** SIGKILLs every worker still running (resumed first, in case it is stopped) and waits for each exit. */
export async function killWorkers(workers: readonly WorkerProcess[]): Promise<void> {
  for (const w of workers) {
    if (w.child.exitCode === null && w.child.signalCode === null) {
      w.child.kill('SIGCONT');
      w.child.kill('SIGKILL');
      await w.exited;
    }
  }
}

/** How a {@link ClusterRun} starts its workers. */
export interface ClusterRunOptions {
  /**
   * Start each worker with the command `shardflow worker --topology test/kit/clusterTopology.ts
   * --broker <broker> --json` (its broker scope `clusterBrokerIdentity(broker, clusterName)`)
   * instead of test/kit/clusterWorker.ts on Redis Streams. Default false.
   */
  readonly cli?: boolean;
  /** With `cli`: `redis://…` (default REDIS_URL) or `pulsar://host:port`. */
  readonly broker?: string;
  /**
   * Give each worker its own data dir (`<run dir>/workers/<name>`) and checkpoints in
   * `file://<run dir>/checkpoints` every `intervalMs`: partitions move through checkpoints
   * only. `verify()` then reads each partition's latest checkpoint. Default: one shared data dir.
   * `standbys`: warm standbys per partition (`standbyReplicas`; default 0).
   */
  readonly checkpoints?: { readonly intervalMs: number; readonly standbys?: number };
}

/**
 * A cluster of worker processes on this machine for a test: its own Redis key prefixes and
 * cluster name, one shared data dir, a producer of clicks in the test process and the ground
 * truth of what it sent. `verify()` reads every store after the workers exited.
 */
export class ClusterRun {
  readonly clusterName = `test-${process.pid}-${Math.floor(Math.random() * 1e9).toString(36)}`;
  readonly keyPrefix = `sfc-test-${process.pid}:`;
  readonly brokerPrefix: string;
  readonly brokerIdentity: BrokerIdentity;
  readonly workers: WorkerProcess[] = [];
  readonly truth = new Map<string, number>();
  readonly #dir = tempDir('sf-cluster-');
  readonly #topology = clusterClickTopology();
  readonly #cli: boolean;
  readonly #checkpoints: ClusterRunOptions['checkpoints'];
  #broker!: Broker;
  #producer!: TopologyProducer<Click>;
  #sent = 0;
  readonly #clients: ClusterClient[] = [];

  constructor(readonly leaseMs: number, options: ClusterRunOptions = {}) {
    this.#cli = options.cli ?? false;
    this.#checkpoints = options.checkpoints;
    this.brokerIdentity = this.#cli
      ? clusterBrokerIdentity(options.broker ?? REDIS_URL, this.clusterName)
      : { kind: 'redis', url: REDIS_URL, scope: `sftest-${process.pid}-${this.clusterName}:` };
    this.brokerPrefix = this.brokerIdentity.scope!;
  }

  /** The test process's broker on this run's scope. */
  get broker(): Broker {
    return this.#broker;
  }

  get dataDir(): string {
    return this.#dir.dir;
  }

  /** The data dir of worker `name`: its own with checkpoints, else the run's. */
  workerDataDir(name: string): string {
    return this.#checkpoints ? join(this.dataDir, 'workers', name) : this.dataDir;
  }

  /** The run's checkpoint store URL (with `checkpoints`). */
  get checkpointsUrl(): string {
    return pathToFileURL(join(this.dataDir, 'checkpoints')).href;
  }

  /** `--checkpoints URL --checkpoint-interval-ms N` or the worker script's two last arguments, with `checkpoints`. */
  #checkpointArgs(cli: boolean): string[] {
    if (!this.#checkpoints) return [];
    const standbys = this.#checkpoints.standbys ?? 0;
    return cli
      ? ['--checkpoints', this.checkpointsUrl, '--checkpoint-interval-ms', String(this.#checkpoints.intervalMs), ...(standbys > 0 ? ['--standbys', String(standbys)] : [])]
      : [this.checkpointsUrl, String(this.#checkpoints.intervalMs), ...(standbys > 0 ? [String(standbys)] : [])];
  }

  async open(): Promise<void> {
    this.#broker = this.#cli
      ? await connectBroker(this.brokerIdentity)
      : await RedisStreamsBroker.connect({ url: REDIS_URL, prefix: this.brokerPrefix, heartbeatMs: 200, deadAfterMs: 2000, blockMs: 100 });
    this.#producer = await openExternalProducer({ broker: this.#broker, dataDir: this.dataDir, namespace: this.#topology.clicks, name: 'clicks-src' });
  }

  /** The arguments of `shardflow worker` for worker `name` of this run (`--inspect-port 0`: a console each). */
  workerArgs(name: string): string[] {
    return [
      'worker', '--topology', 'test/kit/clusterTopology.ts', '--cluster', REDIS_URL, '--cluster-name', this.clusterName, '--key-prefix', this.keyPrefix,
      '--broker', this.brokerIdentity.url!, '--data-dir', this.workerDataDir(name), '--name', name, '--lease-ms', String(this.leaseMs), '--inspect-port', '0', '--json',
      ...this.#checkpointArgs(true),
    ];
  }

  /** Starts a worker process named `name`; resolves once it joined. */
  async startWorker(name: string): Promise<WorkerProcess> {
    const args = this.#cli
      ? [resolve(repoRoot, 'bin/shardflow.mjs'), ...this.workerArgs(name)]
      : ['--import', 'tsx', resolve(repoRoot, 'test/kit/clusterWorker.ts'), REDIS_URL, this.clusterName, this.keyPrefix, this.brokerPrefix, this.workerDataDir(name), name, String(this.leaseMs), ...this.#checkpointArgs(false)];
    const w = spawnWorkerProcess(name, args);
    this.workers.push(w);
    await until(`worker ${name} to join (stderr: ${w.stderr.slice(-500)})`, async () => w.id !== undefined, 60_000);
    return w;
  }

  /** Sends `n` clicks over 40 hosts (skewed: a few get most), awaiting each. */
  async send(n: number): Promise<void> {
    for (let i = 0; i < n; i++, this.#sent++) {
      const k = this.#sent;
      const host = `site-${Math.floor(40 * ((k * 0.6180339887) % 1) ** 2)}.example`;
      await this.#producer.send({ host, n: k });
      this.truth.set(host, (this.truth.get(host) ?? 0) + 1);
    }
  }

  /** What the run's producer of clicks sent (`TopologyProducer.sent()`): the external streams of a quiescence. */
  sent(): SentStream[] {
    return this.#producer.sent();
  }

  /** A cluster client of this run (`connectClusterClient` on the run's broker); `close()` closes it. */
  async client(): Promise<ClusterClient> {
    const c = await connectClusterClient({ cluster: REDIS_URL, clusterName: this.clusterName, keyPrefix: this.keyPrefix, broker: this.#broker });
    this.#clients.push(c);
    return c;
  }

  status(): Promise<ClusterStatus> {
    return clusterStatus({ cluster: REDIS_URL, clusterName: this.clusterName, keyPrefix: this.keyPrefix, broker: this.#broker });
  }

  /** Resolves with the status once every unit runs on one of `live` and each of them is a member. */
  allRunningOn(live: readonly WorkerProcess[], timeoutMs?: number): Promise<ClusterStatus> {
    const ids = new Set(live.map((w) => w.id));
    return until(`every partition running on ${live.map((w) => w.name).join(', ')}`, async () => {
      const s = await this.status();
      const ok = s.partitions.length === 8 && s.partitions.every((p) => p.state === 'running' && ids.has(p.owner)) && [...ids].every((id) => s.workers.some((m) => m.id === id));
      return ok && s;
    }, timeoutMs);
  }

  /** Resolves with the status once every unit runs on `live`, balanced: lease counts differ by at most 1. */
  balancedOn(live: readonly WorkerProcess[]): Promise<ClusterStatus> {
    return until('a balanced assignment', async () => {
      const s = await this.allRunningOn(live);
      const counts = live.map((w) => s.partitions.filter((p) => p.owner === w.id).length);
      return Math.max(...counts) - Math.min(...counts) <= 1 && s;
    });
  }

  /** Every unit running on `live` and every backlog 0, twice in a row 300 ms apart. */
  async quiet(live: readonly WorkerProcess[]): Promise<ClusterStatus> {
    for (;;) {
      const first = await this.allRunningOn(live);
      if (!first.partitions.every((p) => p.backlog === 0)) {
        await new Promise((r) => setTimeout(r, 200));
        continue;
      }
      await new Promise((r) => setTimeout(r, 300));
      const second = await this.status();
      if (second.partitions.every((p) => p.backlog === 0 && p.state === 'running') && second.assignmentRound === first.assignmentRound) return second;
    }
  }

  /** SIGTERMs every worker still running and checks that each exits 0 after handing its partitions back. */
  async stopAll(): Promise<void> {
    const running = this.workers.filter((w) => w.child.exitCode === null && w.child.signalCode === null);
    for (const w of running) w.child.kill('SIGTERM');
    for (const w of running) {
      const { code } = await w.exited;
      assert.equal(code, 0, `worker ${w.name} exits 0 on SIGTERM (stderr: ${w.stderr.slice(-2000)})`);
      const started = w.events.filter((e) => e.event.type === 'started').length;
      const ended = w.events.filter((e) => ['released', 'fenced', 'failed'].includes(e.event.type)).length;
      assert.equal(ended, started, `worker ${w.name} handed back every partition it started`);
    }
  }

  /**
   * After every worker exited: each stage's counts, summed over its stores, equal the ground
   * truth; no outbox row is left; `count` dead-lettered nothing; what `totals` dead-lettered
   * is only late messages of fenced-off owners. @returns those dead letters
   */
  async verify(): Promise<DeadLetter[]> {
    const { topology } = this.#topology;
    const checkpoints = this.#checkpoints ? openCheckpointStore(this.checkpointsUrl) : undefined;
    for (const s of topology.stages) {
      const sums = new Map<string, number>();
      for (let p = 0; p < s.def.input.partitioner.partitions; p++) {
        let path = join(this.dataDir, 'stages', s.name, `p${p}`);
        if (checkpoints) {
          // No shared data dir: the partition's state is its latest checkpoint (the hand-backs took them).
          path = join(this.dataDir, 'verify', s.name, `p${p}`);
          await checkpoints.restore(stageCheckpointKey(this.clusterName, s.name, p), path);
        }
        const store = await Store.open({ path, columnFamilies: stageColumnFamilies(s.def.columnFamilies ?? {}), createIfMissing: false });
        try {
          for await (const [k, v] of store.iterate('hosts')) sums.set(k.toString(), (sums.get(k.toString()) ?? 0) + Number(v.readBigInt64LE()));
          let left = 0;
          for await (const _ of store.iterate(StreamColumnFamilies.outbox)) left++;
          assert.equal(left, 0, `${s.name}/p${p}: no outbox row left unpublished`);
        } finally {
          await store.close();
        }
      }
      assert.deepEqual(new Map([...sums].sort()), new Map([...this.truth].sort()), `stage ${s.name} counted every click exactly once`);
    }
    await checkpoints?.close();
    const dead = async (ns: string, n: number, sub: string) => (await Promise.all(Array.from({ length: n }, (_, p) => this.#broker.deadLetters(topic(ns, partitionId(p)), sub)))).flat();
    assert.deepEqual(await dead('clicks', 6, 'count'), [], 'count dead-lettered nothing');
    const late = await dead('host-deltas', 2, 'totals');
    for (const d of late) assert.match(d.reason, /older than its epoch .* already applied/, 'totals dead-lettered only late messages of fenced-off owners');
    return late;
  }

  /** Kills what still runs, closes the broker, removes this run's keys and data dir. */
  async close(): Promise<void> {
    await killWorkers(this.workers);
    for (const c of this.#clients) await c.close();
    await this.#producer?.close();
    await this.#broker?.close();
    if (this.brokerIdentity.kind === 'pulsar') await deleteBrokerScope(this.brokerIdentity);
    await deleteKeys(...(this.brokerIdentity.kind === 'redis' ? [this.brokerPrefix] : []), `${this.keyPrefix}${this.clusterName}:`);
    this.#dir.cleanup();
  }
}

/**
 * Runs `body` on a fresh, opened {@link ClusterRun}; on a failure prints each worker's last
 * stderr as test diagnostics; always kills what still runs and removes the run's keys,
 * broker scope and data dir.
 */
export async function withClusterRun(t: import('node:test').TestContext, leaseMs: number, options: ClusterRunOptions, body: (run: ClusterRun) => Promise<void>): Promise<void> {
  const run = new ClusterRun(leaseMs, options);
  try {
    await run.open();
    await body(run);
  } catch (err) {
    for (const w of run.workers) t.diagnostic(`${w.name} stderr: ${w.stderr.slice(-1500)}`);
    throw err;
  } finally {
    await run.close();
  }
}
