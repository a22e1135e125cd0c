import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { clusterBrokerIdentity, connectBroker, connectClusterClient, deleteBrokerScope, retireCluster, type ClusterStatus } from '../index.js';
import { crawlOnCluster, type ClusterCrawlResult } from '../jobs/clusterCrawl.js';
import type { WebGraph } from '../replay/graphFile.js';
import { ReplayServer } from '../replay/replayServer.js';
import { hostMapLines } from './crawl.js';
import { WEB_INDEX_STAGE } from '../topology/clusterProtocol.js';
import { ensureLocalRedis, startLocalWorkers } from './localCluster.js';

/** Options of {@link runDemoOnCluster}. */
export interface ClusterDemoOptions {
  readonly workers: number;
  readonly partitions: number;
  /** The cluster's Redis (started on this machine when it is local and silent). */
  readonly cluster: string;
  /** Broker spec: `redis://…` or `pulsar://…`. */
  readonly broker: string;
  /** Parent data dir of the workers (kept); default a temp folder, removed at the end. */
  readonly dataDir?: string;
  readonly weights: string;
  readonly tolerance: number;
  readonly graph: WebGraph;
  /** Crawler actors per worker (default 4). */
  readonly crawlers?: number;
  readonly log: Logger;
  /** Progress lines. */
  readonly say: (line: string) => void;
}

/**
 * The demo on a laptop cluster (`shardflow demo --workers N`): makes sure Redis runs, serves
 * the graph from a replay server in this process (as the one-process demo does), starts N
 * `shardflow worker --web-index --crawl` processes sharing one data dir (unthrottled, any
 * host, the replay server's host map in a file of the data dir), waits until they run every
 * partition, crawls the graph on them as a client (`crawlOnCluster`, every page a seed), stops
 * the workers with SIGTERM (each hands its partitions back and exits 0), and removes the
 * cluster's Redis keys and broker scope.
 * @returns the job's result
 * @throws Error when a worker exits before the end or not with 0 after SIGTERM; the job's errors
 */
export async function runDemoOnCluster(o: ClusterDemoOptions): Promise<ClusterCrawlResult> {
  await ensureLocalRedis(o.cluster);
  const server = new ReplayServer(o.graph);
  const port = await server.listen();
  const clusterName = `demo-${randomUUID().slice(0, 8)}`;
  const dataDir = o.dataDir ?? mkdtempSync(join(tmpdir(), 'shardflow-demo-cluster-'));
  const identity = clusterBrokerIdentity(o.broker, clusterName);
  o.say(`cluster ${clusterName}: ${o.workers} worker processes, ${o.partitions} partitions, Redis ${o.cluster}, broker ${o.broker}, data in ${dataDir}${o.dataDir ? '' : ' (removed at the end)'}; the graph served on 127.0.0.1:${port}`);
  const mapFile = join(dataDir, `replay-hosts-${clusterName}.map`);
  writeFileSync(mapFile, hostMapLines(server.hostMap(port)));
  const workers = startLocalWorkers({
    workers: o.workers, cluster: o.cluster, clusterName, broker: o.broker, dataDir, partitions: o.partitions, weights: o.weights,
    extraArgs: ['--crawl', '--any-host', '--per-host', '256', '--delay-ms', '0', '--crawlers', String(o.crawlers ?? 4), '--map-file', mapFile],
  });
  const broker = await connectBroker(identity);
  const client = await connectClusterClient({ cluster: o.cluster, clusterName, broker });
  try {
    const early = Promise.race(workers.exits.map((e, i) => e.then((code) => Promise.reject(new Error(`worker w${i + 1} exited (${code}) before the job ended`)))));
    early.catch(() => undefined);
    const running = async (): Promise<ClusterStatus> => {
      for (;;) {
        const s = await client.status();
        const units = s.partitions.filter((p) => p.stage === WEB_INDEX_STAGE);
        if (s.workers.length === o.workers && units.length === o.partitions && units.every((p) => p.state === 'running')) return s;
        await new Promise((r) => setTimeout(r, 200));
      }
    };
    const up = await Promise.race([running(), early]);
    o.say(`workers: ${up.workers.map((w) => `${w.name} (pid ${w.pid}) runs ${w.leases}`).join(', ')} partitions`);
    const result = await Promise.race([
      crawlOnCluster({
        client, partitions: o.partitions, seeds: o.graph.pages, log: o.log, tolerance: o.tolerance,
        onCrawled: (seconds) => o.say(`crawled in ${seconds.toFixed(1)} s (the crawl policies drained, every stream applied)`),
        onRound: (r) => { if (r.round % 20 === 0) o.say(`metric round ${r.round}: pushed ${r.pushed}, messages ${r.messages}, error bound ${r.bound.toExponential(2)}`); },
      }),
      early,
    ]);
    const codes = await workers.stop();
    if (codes.some((c) => c !== 0)) throw new Error(`a worker exited with ${codes.join(', ')} after SIGTERM (0 expected)`);
    o.say(`the ${o.workers} workers handed their partitions back and exited 0`);
    return result;
  } finally {
    await workers.kill();
    await server.close();
    await client.close();
    await broker.close();
    await deleteBrokerScope(identity).catch((err: unknown) => o.say(`could not remove the cluster's broker scope: ${String(err)}`));
    await retireCluster({ cluster: o.cluster, clusterName }).catch((err: unknown) => o.say(`could not remove the cluster's Redis keys: ${String(err)}`));
    if (o.dataDir) rmSync(mapFile, { force: true });
    else rmSync(dataDir, { recursive: true, force: true });
  }
}
