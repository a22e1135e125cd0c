import { Command, InvalidArgumentError } from 'commander';
import {
  CLUSTER_NAME, DEFAULT_LEASE_MS, MIN_WORKER_LEASE_MS, clusterBrokerIdentity, connectBroker, loadClusterApplication, startWorker, type ClusterApplication, type WorkerEvent,
} from '../index.js';
import { cliLogger, integerIn, MAX_PARTITIONS, nonNegativeInt, parseWeights, partitionCount, portNumber, positiveInt } from './options.js';
import { webIndexApplication, type WebIndexCrawlOptions } from '../topology/webIndexApplication.js';
import { anyHost, hostAllowList } from '../actors/crawlPolicy/crawlScope.js';
import { addFetchPolicyOptions, collect, hostMapEntry, readHostMapFile } from './crawl.js';
import { weightFunction } from '../actors/metrics/weights.js';
import { weightsLabel as weightsOf } from './jobOptions.js';

/** Parses `--cluster`: a `redis://` URL. @throws commander's InvalidArgumentError */
export function clusterUrl(value: string): string {
  if (!/^rediss?:\/\//.test(value)) throw new InvalidArgumentError(`expected the cluster's Redis as redis://host:port, got ${JSON.stringify(value)}`);
  return value;
}

/** Parses `--checkpoints`: `file:///DIR` or `s3://BUCKET/PREFIX`. @throws commander's InvalidArgumentError */
export function checkpointUrl(value: string): string {
  if (!/^(file:\/\/\/|s3:\/\/[^/]+)/.test(value)) throw new InvalidArgumentError(`expected file:///DIR or s3://BUCKET/PREFIX, got ${JSON.stringify(value)}`);
  return value;
}

/** Parses a cluster name (`--cluster-name`, `cluster status --name`). @throws commander's InvalidArgumentError */
export function clusterName(value: string): string {
  if (!CLUSTER_NAME.test(value)) throw new InvalidArgumentError(`expected 1 to 64 letters, digits, '.', '_' or '-', got ${JSON.stringify(value)}`);
  return value;
}

/** One line for a worker event: `started count/3 epoch 2`. */
function eventLine(e: WorkerEvent): string {
  switch (e.type) {
    case 'joined':
    case 'left':
      return `${e.type} ${e.worker}`;
    case 'leader':
      return `leader ${e.worker} epoch ${e.epoch}`;
    case 'assigned':
      return `assigned round ${e.round}: ${e.placed.length} placed, ${e.moves.length} moves${e.unplaced.length ? `, unplaced ${e.unplaced.join(' ')}` : ''}`;
    case 'restored':
      return `restored ${e.unit} epoch ${e.epoch} from checkpoint ${e.sequence} (${e.bytes} bytes${e.cachedBytes > 0 ? `, ${e.cachedBytes} from the standby cache` : ''}${e.walChunks > 0 ? `, ${e.walChunks} WAL tails` : ''}, ${e.seconds.toFixed(3)} s; ${e.reason})`;
    case 'checkpointed':
      return `checkpointed ${e.unit} epoch ${e.epoch}: checkpoint ${e.sequence} (${e.bytes} bytes in ${e.files} files, ${e.uploadedBytes} bytes stored${e.walTail ? ', a WAL tail' : ''}${e.groupedManifests > 1 ? ` in a group of ${e.groupedManifests}` : ''}; ${(e.checkpointSeconds + e.uploadSeconds).toFixed(3)} s)`;
    case 'warmed':
      return `warmed ${e.unit}: checkpoint ${e.sequence} (${e.fetchedBytes} bytes in ${e.fetchedFiles} files fetched; ${e.bytes} bytes in ${e.files} cached; ${e.seconds.toFixed(3)} s)`;
    case 'waiting':
    case 'fenced':
    case 'failed':
      return `${e.type} ${e.unit} epoch ${e.epoch}: ${e.reason}`;
    default:
      return `${e.type} ${e.unit} epoch ${e.epoch}`;
  }
}

interface WorkerCliOptions {
  topology?: string;
  webIndex: boolean;
  partitions: number;
  weights: string;
  export?: string;
  cluster: string;
  clusterName?: string;
  broker: string;
  dataDir: string;
  name?: string;
  maxPartitions?: number;
  leaseMs: number;
  maxStallMs?: number;
  inspectPort?: number;
  keyPrefix?: string;
  checkpoints?: string;
  checkpointIntervalMs?: number;
  standbys?: number;
  json: boolean;
  logLevel: string;
  crawl: boolean;
  crawlers: number;
  map: Map<string, string>;
  mapFile: string[];
  allowHost: string[];
  anyHost: boolean;
  perHost: number;
  delayMs: number;
  recrawlHours: number;
  goneRecrawlHours: number;
  recrawl?: boolean;
  userAgent: string;
  robotsToken: string;
  maxRedirects: number;
  timeoutMs: number;
  maxBodyBytes: number;
}

/** The options of `worker` that only `--web-index --crawl` takes (their attribute names). */
const CRAWL_ONLY = ['crawlers', 'map', 'mapFile', 'allowHost', 'anyHost', 'perHost', 'delayMs', 'recrawlHours', 'goneRecrawlHours', 'recrawl', 'userAgent', 'robotsToken', 'maxRedirects', 'timeoutMs', 'maxBodyBytes'] as const;

/**
 * `shardflow worker`: runs a framework topology's (or any ClusterApplication's) partitions as one worker of a cluster
 * (`startWorker`, docs/cluster.md) until SIGTERM or SIGINT, then hands its partitions back and
 * exits 0. Prints one line per worker event on stdout (`--json`: `{"event":…,"at":ms}`).
 * Exit codes: 0 after a hand-back, 1 when a failure stopped the worker, 2 for bad input.
 */
export function workerCommand(setExit: (code: number) => void): Command {
  return addFetchPolicyOptions(new Command('worker')
    .description('run the partitions the cluster assigns to this process, for a topology module or the web index, until SIGTERM/SIGINT (hands them back, exits 0)')
    .option('--topology <module>', 'an ES module (.js, or .ts, loaded through tsx) whose default export is the Topology or a ClusterApplication, or a function returning one')
    .option('--web-index', 'run web-index partitions instead of a topology module (clients: `shardflow rank --cluster`); cluster name default web-index', false)
    .option('--partitions <n>', `with --web-index: the cluster's partitions (1..${MAX_PARTITIONS}; every worker gives the same)`, partitionCount, 16)
    .option('--weights <name>', 'with --web-index: link weights, uniform, reasonable or a weight table .json (every worker gives the same; shardflow crawl defaults to reasonable: give it to the workers of a crawl for the same scores)', parseWeights, 'uniform')
    .option('--crawl', 'with --web-index: every partition also runs its crawl policy and this worker a crawler pool (clients: `shardflow crawl --cluster`); needs --any-host or --allow-host', false)
    .option('--crawlers <n>', 'with --crawl: crawler actors of this worker', positiveInt, 4)
    .option('--map <host=address:port>', 'with --crawl: reach a host at an address without DNS (repeatable); mapped hosts may be on loopback or private addresses', hostMapEntry, new Map<string, string>())
    .option('--map-file <file>', 'with --crawl: a file of host=address:port lines, as --map (repeatable)', collect, [])
    .option('--allow-host <host>', 'with --crawl: crawl this host (repeatable); other hosts\' URLs are recorded in the frontier, not fetched', collect, [])
    .option('--any-host', 'with --crawl: crawl every host reached', false), 'with --crawl: ')
    .option('--export <name>', 'use this named export of the module instead of the default export')
    .requiredOption('--cluster <url>', "(required) the Redis that coordinates the cluster, redis://host:port", clusterUrl)
    .option('--cluster-name <name>', "the cluster to join (default: the topology's or application's name)", clusterName)
    .requiredOption('--broker <spec>', "(required) memory (this process only), redis://host:port or pulsar://host:port; topics under the cluster's scope")
    .requiredOption('--data-dir <dir>', '(required) parent folder of the partition stores, shared by the workers of one machine')
    .option('--name <name>', 'worker name shown in status and events (default: host name and pid)')
    .option('--max-partitions <n>', 'most partition units this worker takes', positiveInt)
    .option('--lease-ms <ms>', `partition, leader and membership lease time (>= ${MIN_WORKER_LEASE_MS}); a killed worker's partitions are owned again within lease + 2 heartbeats`, integerIn(MIN_WORKER_LEASE_MS, Number.MAX_SAFE_INTEGER, `an integer >= ${MIN_WORKER_LEASE_MS}`), DEFAULT_LEASE_MS)
    .option('--max-stall-ms <ms>', 'longest the event loop may stay blocked while the lease keeper thread still renews the leases (default 4 x lease)', positiveInt)
    .option('--inspect-port <port>', 'serve this worker\'s console on 127.0.0.1:<port> (0: any free port); published in its membership record for `shardflow tree --cluster`', portNumber)
    .option('--key-prefix <prefix>', "prefix of the cluster's Redis keys", 'sfc:')
    .option('--checkpoints <url>', 'checkpoint the partitions to file:///DIR or s3://BUCKET/PREFIX (AWS_* environment) so they move between workers with their own data dirs; publishes and acks wait for the checkpoint that covers them', checkpointUrl)
    .option('--checkpoint-interval-ms <ms>', 'with --checkpoints: period of each partition\'s checkpoints', positiveInt)
    .option('--standbys <n>', 'with --checkpoints: warm standbys per partition; this worker keeps the newest checkpoints of the partitions it stands by for in <data dir>/standby-cache/<name>, so a crash move to it fetches only the tail', nonNegativeInt)
    .option('--json', 'print each event as a JSON line', false)
    .option('--log-level <level>', 'pino log level on stderr', 'warn')
    .action(async (opts: WorkerCliOptions, command: Command) => {
      if ((opts.topology === undefined) === !opts.webIndex) throw new InvalidArgumentError('give --topology MODULE or --web-index (one of them)');
      if (opts.checkpointIntervalMs !== undefined && opts.checkpoints === undefined) throw new InvalidArgumentError('--checkpoint-interval-ms needs --checkpoints');
      if (opts.standbys !== undefined && opts.standbys > 0 && opts.checkpoints === undefined) throw new InvalidArgumentError('--standbys needs --checkpoints');
      if (opts.crawl && !opts.webIndex) throw new InvalidArgumentError('--crawl goes with --web-index');
      if (!opts.crawl) {
        const given = CRAWL_ONLY.filter((o) => command.getOptionValueSource(o) === 'cli');
        if (given.length > 0) throw new InvalidArgumentError(`${given.map((o) => `--${o.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`).join(', ')} go${given.length === 1 ? 'es' : ''} with --web-index --crawl`);
      }
      const application = opts.webIndex ? webIndexWorkerApplication(opts) : await loadClusterApplication(opts.topology!, opts.export);
      if (opts.clusterName === undefined && !CLUSTER_NAME.test(application.name)) {
        throw new InvalidArgumentError(`the topology's name ${JSON.stringify(application.name)} is not a cluster name (letters, digits, '.', '_', '-'): give --cluster-name`);
      }
      const name = opts.clusterName ?? application.name;
      const log = cliLogger(opts.logLevel);
      if (opts.broker === 'memory') process.stderr.write('shardflow worker: --broker memory: only messages published inside this process reach its partitions (use redis:// or pulsar:// for a cluster of processes)\n');
      const broker = await connectBroker(clusterBrokerIdentity(opts.broker, name));
      const print = (e: WorkerEvent): void => {
        process.stdout.write(opts.json ? `${JSON.stringify({ event: e, at: Date.now() })}\n` : `${new Date().toISOString()} ${eventLine(e)}\n`);
      };
      // Signals are caught from here on: one that arrives while the worker joins stops it as soon as it has joined.
      let signalled: NodeJS.Signals | undefined;
      let onFirstSignal: (() => void) | undefined;
      const onSignal = (signal: NodeJS.Signals): void => {
        if (signalled) {
          process.stderr.write(`shardflow worker: ${signal} again: exiting without finishing the hand-back (the leases run out)\n`);
          process.exit(signal === 'SIGTERM' ? 143 : 130);
        }
        signalled = signal;
        onFirstSignal?.();
      };
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
      let worker;
      try {
        worker = await startWorker({
          cluster: opts.cluster,
          clusterName: name,
          application,
          broker,
          dataDir: opts.dataDir,
          leaseMs: opts.leaseMs,
          ...(opts.maxStallMs !== undefined ? { maxStallMs: opts.maxStallMs } : {}),
          keyPrefix: opts.keyPrefix ?? 'sfc:',
          logger: log,
          onEvent: print,
          ...(opts.name !== undefined ? { name: opts.name } : {}),
          ...(opts.maxPartitions !== undefined ? { maxPartitions: opts.maxPartitions } : {}),
          ...(opts.checkpoints !== undefined ? { checkpoints: opts.checkpoints } : {}),
          ...(opts.checkpointIntervalMs !== undefined ? { checkpointIntervalMs: opts.checkpointIntervalMs } : {}),
          ...(opts.standbys !== undefined ? { standbyReplicas: opts.standbys } : {}),
          ...(opts.inspectPort !== undefined ? { inspect: { port: opts.inspectPort, host: '127.0.0.1' } } : {}),
        });
      } catch (err) {
        await broker.close();
        throw err;
      }
      if (worker.host.inspection) process.stderr.write(`shardflow worker ${worker.id}: console at ${worker.host.inspection.url}\n`);
      const w = worker;
      const code = await new Promise<number>((done) => {
        onFirstSignal = (): void => {
          process.stderr.write(`shardflow worker ${w.id}: ${signalled}: handing the partitions back\n`);
          void w.stop().then(() => done(0), () => done(1));
        };
        if (signalled) onFirstSignal();
        w.closed.catch((err: unknown) => {
          process.stderr.write(`shardflow worker ${w.id}: stopped by a failure: ${err instanceof Error ? err.message : String(err)}\n`);
          done(1);
        });
      });
      await broker.close();
      setExit(code);
    });
}

/**
 * The web index as the application of `shardflow worker --web-index`: its partitions, link
 * weights (a weight table is labelled by a digest of its file, so workers given different
 * tables are refused) and a pino logger at `--log-level`.
 */
function webIndexWorkerApplication(opts: WorkerCliOptions): ClusterApplication {
  const weightsLabel = weightsOf(opts.weights);
  return webIndexApplication({
    partitions: opts.partitions, weigh: weightFunction(opts.weights), weightsLabel, log: cliLogger(opts.logLevel),
    ...(opts.crawl ? { crawl: workerCrawlOptions(opts) } : {}),
  });
}

/**
 * The crawl of `worker --web-index --crawl`: its crawler count, fetcher (the host map of
 * `--map` and `--map-file`) and crawl policy (politeness, recrawl, scope).
 * @throws commander's InvalidArgumentError without a scope (--any-host or --allow-host) or for a bad map file
 */
function workerCrawlOptions(opts: WorkerCliOptions): WebIndexCrawlOptions {
  if (!opts.anyHost && opts.allowHost.length === 0) throw new InvalidArgumentError('--crawl needs a scope shared by every worker: --any-host, or --allow-host HOST (repeatable)');
  if (opts.anyHost && opts.allowHost.length > 0) throw new InvalidArgumentError('give --any-host or --allow-host, not both');
  let hostMap = opts.map;
  for (const file of opts.mapFile) hostMap = readHostMapFile(file, hostMap);
  return {
    crawlers: opts.crawlers,
    fetcher: {
      hostMap, maxBodyBytes: opts.maxBodyBytes, timeoutMs: opts.timeoutMs, userAgent: opts.userAgent, robotsToken: opts.robotsToken, maxRedirects: opts.maxRedirects,
    },
    policy: {
      maxInFlightPerHost: opts.perHost, minDelayMs: opts.delayMs, recrawlIntervalMs: opts.recrawlHours * 3600_000, goneRecrawlMs: opts.goneRecrawlHours * 3600_000, ...(opts.recrawl ? { recrawlFetchedBefore: Date.now() } : {}),
      scope: opts.anyHost ? anyHost : hostAllowList(opts.allowHost),
    },
  };
}
