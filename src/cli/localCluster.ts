import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** Node options that make a worker run the copy of the CLI this process runs: the sources under tsx (`shardflow-source`) or the compiled dist/ (bin/shardflow.mjs picks it when current). */
const sameBuild = import.meta.url.endsWith('.ts') ? ['--conditions=shardflow-source'] : [];

/** Options of {@link startLocalWorkers}. */
export interface LocalWorkersOptions {
  /** Worker processes to start (>= 1). */
  readonly workers: number;
  /** The cluster's Redis (`redis://host:port`). */
  readonly cluster: string;
  readonly clusterName: string;
  /** Broker spec: `redis://…` or `pulsar://…` (memory cannot cross processes). */
  readonly broker: string;
  /** Parent data dir of the partition stores, shared by the workers (one machine). */
  readonly dataDir: string;
  /** Web-index partitions of the cluster. */
  readonly partitions: number;
  /** `--weights` of the workers (default uniform). */
  readonly weights?: string;
  /** Partition lease in ms (default 3000: a killed worker's partitions move within 4.5 s). */
  readonly leaseMs?: number;
  /** Worker names: `<prefix><i>` from 1 (default `w`). */
  readonly namePrefix?: string;
  /** Where the workers' stderr goes (default: inherited). */
  readonly stderr?: 'inherit' | 'ignore';
  /** More arguments of every worker (e.g. `--crawl --any-host --map-file F`). */
  readonly extraArgs?: readonly string[];
}

/** Worker processes of a web-index cluster on this machine. */
export interface LocalWorkers {
  readonly processes: ChildProcess[];
  /** Exit code of each process once it exited (null for a signal). */
  readonly exits: Array<Promise<number | null>>;
  /** Starts one more worker (named `<prefix><n>`) and returns its index. */
  add(): number;
  /** SIGTERM every live worker (a hand-back) and waits; @returns their exit codes */
  stop(): Promise<Array<number | null>>;
  /** SIGKILL every live worker and waits. */
  kill(): Promise<void>;
}

/**
 * Starts `workers` processes of `shardflow worker --web-index` (this package's bin, from its
 * sources) on one machine. They join the cluster, and the leader spreads the partitions.
 * @throws RangeError for `--broker memory`
 */
export function startLocalWorkers(o: LocalWorkersOptions): LocalWorkers {
  if (o.broker === 'memory') throw new RangeError('a cluster needs a broker that crosses processes: --broker redis://… or pulsar://…');
  const processes: ChildProcess[] = [];
  const exits: Array<Promise<number | null>> = [];
  const add = (): number => {
    const i = processes.length + 1;
    const child = spawn(process.execPath, [
      ...sameBuild, join(root, 'bin/shardflow.mjs'), 'worker', '--web-index', '--partitions', String(o.partitions), '--weights', o.weights ?? 'uniform',
      '--cluster', o.cluster, '--cluster-name', o.clusterName, '--broker', o.broker, '--data-dir', o.dataDir,
      '--name', `${o.namePrefix ?? 'w'}${i}`, '--lease-ms', String(o.leaseMs ?? 3000), '--json', ...(o.extraArgs ?? []),
    ], { stdio: ['ignore', 'ignore', o.stderr ?? 'inherit'] });
    processes.push(child);
    exits.push(new Promise((r) => child.on('exit', (code) => r(code))));
    return i - 1;
  };
  for (let i = 0; i < o.workers; i++) add();
  const live = () => processes.filter((c) => c.exitCode === null && c.signalCode === null);
  return {
    processes,
    exits,
    add,
    async stop() {
      for (const c of live()) c.kill('SIGTERM');
      return Promise.all(exits);
    },
    async kill() {
      for (const c of live()) c.kill('SIGKILL');
      await Promise.all(exits);
    },
  };
}

/**
 * Makes sure a Redis answers at `url`: when nothing answers on 127.0.0.1 or localhost, runs
 * scripts/redis/start.sh for that port (installs Debian's redis-server with apt when root).
 * @throws Error when Redis still does not answer, or the URL is not local and does not answer
 */
export async function ensureLocalRedis(url: string): Promise<void> {
  if (await pings(url)) return;
  const u = new URL(url);
  if (!['127.0.0.1', 'localhost'].includes(u.hostname)) throw new Error(`no Redis answers at ${url}`);
  const started = spawnSync('bash', [join(root, 'scripts/redis/start.sh')], { stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, REDIS_PORT: u.port || '6379' } });
  if (started.status !== 0 || !(await pings(url))) throw new Error(`could not start a Redis at ${url} (scripts/redis/start.sh exited ${started.status})`);
}

async function pings(url: string): Promise<boolean> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1000 });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return (await redis.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}
