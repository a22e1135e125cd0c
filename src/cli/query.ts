import { existsSync, readdirSync } from 'node:fs';
import { Command, InvalidArgumentError as CommanderArgumentError } from 'commander';
import { request } from 'undici';
import { weightFunction } from '../actors/metrics/weights.js';
import { startWebIndex } from '../topology/webIndex.js';
import { DataDir, readRecord } from '../topology/dataDir.js';
import { MAX_LIMIT, QueryService } from '../query/queryService.js';
/** The query server's module (fastify and its plugins), loaded when a command serves: most CLI processes (workers, jobs) never do. */
const queryServer = () => import('../query/server.js');
import { cliLogger, integerIn, nonNegativeInt, openBroker, partitionCount, portNumber, positiveInt } from './options.js';
import { addExposureOptions, addTokenOptions, checkExposure, resolveToken } from './serveOptions.js';
import { clusterBrokerIdentity, connectBroker, connectClusterClient, systemClock, type ClusterClient } from '../index.js';
import { WEB_INDEX_STAGE } from '../topology/clusterProtocol.js';
import { hostPartitioner } from '../actors/partition/hostPartitioner.js';
import { refusedFromStatus, remotePartitionView } from '../query/remoteView.js';
import { clusterName, clusterUrl } from './worker.js';
import { WEB_INDEX_CLUSTER } from './rankCluster.js';

/** Exit codes of `shardflow query`: 0 answered, 1 not found (404), 2 bad input (other 4xx: 400, 401, 403, 405, ...), 3 server unreachable or failing. */
export const QueryExit = Object.freeze({ ok: 0, notFound: 1, badInput: 2, unavailable: 3 } as const);

const KINDS = ['page', 'outlinks', 'backlinks', 'host', 'top-pages', 'top-hosts', 'top-sites'] as const;
type Kind = (typeof KINDS)[number];

/**
 * The API path and query of one `shardflow query` call.
 * @throws commander's InvalidArgumentError for an unknown kind, a missing target, or `--limit` /
 *   `--offset` on a query that does not take it (the API refuses unknown parameters)
 */
export function queryPath(kind: string, target: string | undefined, paging: { limit?: number; offset?: number }): string {
  if (!(KINDS as readonly string[]).includes(kind)) throw new CommanderArgumentError(`unknown query ${JSON.stringify(kind)}: use ${KINDS.join(', ')}`);
  const k = kind as Kind;
  const q = new URLSearchParams();
  if (paging.limit !== undefined && k === 'page') throw new CommanderArgumentError('--limit does not apply to query page');
  if (paging.offset !== undefined && k !== 'outlinks' && k !== 'backlinks') throw new CommanderArgumentError(`--offset applies to outlinks and backlinks only, not to query ${k}`);
  if (paging.limit !== undefined) q.set('limit', String(paging.limit));
  if (paging.offset !== undefined) q.set('offset', String(paging.offset));
  if (k === 'top-pages' || k === 'top-hosts' || k === 'top-sites') return `/v1/top/${k.slice(4)}${q.size ? `?${q}` : ''}`;
  if (!target) throw new CommanderArgumentError(`query ${k} needs a ${k === 'host' ? 'host' : 'URL'}`);
  if (k === 'host') {
    let host = target;
    try {
      if (/^https?:\/\//i.test(target)) host = new URL(target).host;
    } catch {
      // sent as given: the server explains what is wrong
    }
    return `/v1/hosts/${encodeURIComponent(host)}${q.size ? `?${q}` : ''}`;
  }
  q.set('url', target);
  return `/v1/${k}?${q}`;
}

/** `shardflow query page|outlinks|backlinks|host|top-pages|top-hosts|top-sites [URL|HOST]`: asks a running query API. */
export function queryCommand(setExit: (code: number) => void): Command {
  const command = new Command('query')
    .description('ask the query API of a running index (`shardflow serve` or `shardflow crawl --serve`) and print its JSON answer')
    .argument('<kind>', KINDS.join(' | '))
    .argument('[target]', 'the URL (page, outlinks, backlinks) or host (host)')
    .option('--api <url>', 'base URL of the query API', 'http://127.0.0.1:7070');
  return addTokenOptions(command, 'client')
    .option('--limit <n>', `items in a list answer (1..${MAX_LIMIT})`, integerIn(1, MAX_LIMIT, `an integer from 1 to ${MAX_LIMIT}`))
    .option('--offset <n>', 'items to skip (outlinks, backlinks)', nonNegativeInt)
    .action(async (kind: string, target: string | undefined, opts) => {
      const path = queryPath(kind, target, { ...(opts.limit !== undefined ? { limit: opts.limit } : {}), ...(opts.offset !== undefined ? { offset: opts.offset } : {}) });
      const token = resolveToken(opts);
      let res;
      try {
        res = await request(new URL(path, opts.api), { method: 'GET', headers: { accept: 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) } });
      } catch (err) {
        console.error(`shardflow query: cannot reach ${opts.api}: ${(err as Error).message}`);
        setExit(QueryExit.unavailable);
        return;
      }
      const text = await res.body.text();
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        body = text;
      }
      if (res.statusCode === 200) {
        console.log(JSON.stringify(body, null, 2));
        setExit(QueryExit.ok);
        return;
      }
      const reason = typeof body === 'object' && body !== null && 'reason' in body ? (body as { reason: string }).reason : text;
      console.error(`shardflow query: ${res.statusCode}: ${reason}`);
      if (typeof body === 'object' && body !== null && 'detail' in body) console.error(JSON.stringify((body as { detail: unknown }).detail, null, 2));
      setExit(res.statusCode === 404 ? QueryExit.notFound : res.statusCode < 500 ? QueryExit.badInput : QueryExit.unavailable);
    });
}

/** `shardflow serve`: open the stores of a data folder and serve the query API. */
export function serveCommand(setExit: (code: number) => void): Command {
  const command = new Command('serve')
    .description('open the partitions of a data folder (left by `shardflow crawl --data-dir`), or ask those of a cluster\'s workers (--cluster), and serve the query API until interrupted')
    .option('--data-dir <dir>', 'folder holding p0 .. p<N-1> (or --cluster)')
    .option('--cluster <url>', "serve the web index of a cluster's workers (`shardflow worker --web-index`) coordinated by this Redis: each read is asked of its key's owner through the broker", clusterUrl)
    .option('--cluster-name <name>', `with --cluster: the cluster's name (default ${WEB_INDEX_CLUSTER})`, clusterName)
    .option('--broker <spec>', "with --cluster: the cluster's broker, redis://HOST:PORT or pulsar://HOST:PORT (default: the --cluster Redis)")
    .option('--key-prefix <prefix>', "with --cluster: prefix of the cluster's Redis keys", 'sfc:')
    .option('--partitions <n>', 'number of partitions (default: the p<i> folders found)', partitionCount)
    .option('--host <address>', 'address to listen on; a non-loopback address needs a token (or --insecure)', '127.0.0.1')
    .option('--port <port>', 'port (0: any free port)', portNumber, 7070);
  return addExposureOptions(addTokenOptions(command, 'server'))
    .option('--log-level <level>', 'pino log level on stderr', 'warn')
    .addHelpText('after', '\nThe token comes from --token-file, else $SHARDFLOW_TOKEN (--token works but shows in `ps`).\nA --host other than a loopback address is refused without a token unless --insecure.\nSee docs/query-api.md.')
    .action(async (opts) => {
      const token = resolveToken(opts);
      checkExposure({ host: opts.host, token, insecure: opts.insecure });
      if ((opts.cluster === undefined) === (opts.dataDir === undefined)) throw new CommanderArgumentError('give --data-dir DIR or --cluster URL (one of them)');
      if (opts.cluster !== undefined) {
        await serveCluster(opts, token);
        setExit(0);
        return;
      }
      if (!existsSync(opts.dataDir)) throw new CommanderArgumentError(`no such data folder: ${opts.dataDir}`);
      const found = readdirSync(opts.dataDir).filter((n) => /^p\d+$/.test(n)).length;
      // The data dir's record says how many partitions it holds (a missing p<i> folder must not
      // make it serve with a smaller count, routing keys to the wrong stores).
      const recorded = readRecord(opts.dataDir)?.partitions;
      const partitions: number = opts.partitions ?? recorded ?? found;
      if (partitions < 1) throw new CommanderArgumentError(`no partition folder (p0, p1, ...) in ${opts.dataDir}`);
      if (recorded === undefined && found !== 0 && partitions !== found) throw new CommanderArgumentError(`${opts.dataDir} holds ${found} partitions, not ${partitions}: keys would be routed to the wrong ones`);
      // One process at a time on a data dir, as a job: a second serve (or a job) would find its
      // stores held by RocksDB and answer 500s for ever instead of being refused. DataDir.open
      // takes the lock and checks the shape as a job does: the partition count, a missing or
      // foreign partition store, the URL key form.
      const dir = await DataDir.open(opts.dataDir, { partitions, partitioner: hostPartitioner(partitions).describe() });
      if (dir.needsRecovery) process.stderr.write(`${dir.describe({ recovering: false })}\nserving what its stores hold; run the job again on it to repair what that run left in flight\n`);
      const lock = { release: () => dir.release() };
      let broker: Awaited<ReturnType<typeof openBroker>> | undefined;
      let index: Awaited<ReturnType<typeof startWebIndex>> | undefined;
      try {
        broker = await openBroker('memory');
        index = await startWebIndex({ partitions, dataDir: opts.dataDir, broker, weigh: weightFunction('reasonable'), log: cliLogger(opts.logLevel), crawlers: 0 });
      } catch (err) {
        await broker?.close();
        lock.release();
        throw err;
      }
      try {
        const service = new QueryService({ partitioner: index.partitioner, view: (p) => index.view(p), clock: index.system.clock });
        const running = index;
        // A drop takes the host's pages' shares back from their targets as metric residuals
        // (corrections); no job runs the metric here, so the drop converges it before it
        // answers, one drop at a time (found by a new user: after a drop the served scores
        // kept those residuals, 2 to 4% L1 off, until a job ran on the data dir).
        let drops: Promise<unknown> = Promise.resolve();
        const dropHost = (h: string) => {
          const dropped = drops.then(async () => {
            const report = await running.dropHost(h);
            await running.quiescence();
            const metric = await running.converge({});
            if (!metric.converged) throw new Error(`host ${report.host} dropped, but the link metric did not converge again within its round limit (${metric.rounds} rounds): scores are not within the tolerance`);
            return report;
          });
          drops = dropped.catch(() => undefined);
          return dropped;
        };
        const server = await (await queryServer()).startQueryServer({ service, host: opts.host, port: opts.port, ...(token ? { token } : {}), allowedHosts: opts.allowedHost, insecure: opts.insecure, dropHost });
        console.log(`query API on ${server.url} (${partitions} partitions from ${opts.dataDir})`);
        await new Promise<void>((resolve) => {
          process.once('SIGINT', resolve);
          process.once('SIGTERM', resolve);
        });
        await server.close();
        setExit(0);
      } finally {
        await index.stop();
        await broker.close();
        lock.release();
      }
    });
}

/** A cluster's query API opened by {@link openClusterQueryServer}. */
export interface ClusterQueryServer {
  /** Where it listens, e.g. `http://127.0.0.1:7070`. */
  readonly url: string;
  /** The web index's partition count (from the stage the workers recorded). */
  readonly partitions: number;
  /** Closes the HTTP server, then the cluster client and its broker. Idempotent. */
  close(): Promise<void>;
}

/**
 * The query API of a cluster's web index, from any process: every read is asked of its key's
 * owner (`remotePartitionView`), so answers follow partitions as they move (a read asked
 * during a move waits in the partition's request topic for its next owner). Opens a broker in
 * the cluster's scope and a cluster client; with `opts.waitMs` (ms, default 0), waits that long
 * for a first worker to record the web index's stage (a client started before its workers).
 * @throws commander's InvalidArgumentError for the memory broker or a cluster that runs no web
 *   index (none recorded after `waitMs`); the abort reason when `signal` aborts; the listen error
 */
export async function openClusterQueryServer(opts: Record<string, any>, token: string | undefined, signal?: AbortSignal): Promise<ClusterQueryServer> {
  const name: string = opts.clusterName ?? WEB_INDEX_CLUSTER;
  if (opts.broker === 'memory') throw new CommanderArgumentError('--cluster needs the workers\' broker: --broker redis://HOST:PORT or pulsar://HOST:PORT (the memory broker does not cross processes)');
  const brokerSpec: string = opts.broker ?? opts.cluster;
  const broker = await connectBroker(clusterBrokerIdentity(brokerSpec, name));
  let client: ClusterClient | undefined;
  try {
    client = await connectClusterClient({ cluster: opts.cluster, clusterName: name, broker, keyPrefix: opts.keyPrefix });
    const partitions = await webIndexPartitions(client, name, opts.waitMs ?? 0, signal);
    const asker = client;
    const refused = refusedFromStatus(() => asker.status());
    const service = new QueryService({ partitioner: hostPartitioner(partitions), view: async (p) => remotePartitionView(asker, p, { refused }), clock: systemClock });
    const server = await (await queryServer()).startQueryServer({ service, host: opts.host, port: opts.port, ...(token ? { token } : {}), allowedHosts: opts.allowedHost, insecure: opts.insecure });
    let closing: Promise<void> | undefined;
    return {
      url: server.url,
      partitions,
      close: () => (closing ??= (async () => {
        try {
          await server.close();
        } finally {
          await asker.close();
          await broker.close();
        }
      })()),
    };
  } catch (err) {
    await client?.close();
    await broker.close();
    throw err;
  }
}

/**
 * The partition count of the cluster's web index, once a worker recorded its stage (polled
 * every 200 ms for `waitMs`).
 * @throws commander's InvalidArgumentError when the cluster runs other stages, or none after `waitMs`
 */
async function webIndexPartitions(client: ClusterClient, name: string, waitMs: number, signal: AbortSignal | undefined): Promise<number> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    signal?.throwIfAborted();
    const stages = (await client.status()).stages;
    const stage = stages?.find((s) => s.name === WEB_INDEX_STAGE);
    if (stage) return stage.partitions;
    if (stages || Date.now() >= deadline) throw new CommanderArgumentError(`cluster ${name} runs no web index (start its workers with \`shardflow worker --web-index\`)`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * `serve --cluster`: {@link openClusterQueryServer} until SIGINT or SIGTERM. No admin routes
 * (dropping a host needs a crawl on the cluster).
 * @throws as `openClusterQueryServer`
 */
export async function serveCluster(opts: Record<string, any>, token: string | undefined): Promise<void> {
  const served = await openClusterQueryServer(opts, token);
  try {
    console.log(`query API on ${served.url} (${served.partitions} partitions of cluster ${opts.clusterName ?? WEB_INDEX_CLUSTER}, each read asked of its owner)`);
    await untilSignal();
  } finally {
    await served.close();
  }
}

/** Resolves at the next SIGINT or SIGTERM. */
export function untilSignal(): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      process.off('SIGINT', done);
      process.off('SIGTERM', done);
      resolve();
    };
    process.once('SIGINT', done);
    process.once('SIGTERM', done);
  });
}
