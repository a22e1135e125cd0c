import { readFileSync } from 'node:fs';
import { Command, InvalidArgumentError as CommanderArgumentError } from 'commander';
import type { Logger } from 'pino';
import { CrawlBudget } from '../actors/crawlPolicy/crawlBudget.js';
import { checkRobotsToken, DEFAULT_MAX_REDIRECTS, DEFAULT_ROBOTS_TOKEN, DEFAULT_USER_AGENT } from '../actors/crawler/httpFetch.js';
import { anyHost, hostAllowList } from '../actors/crawlPolicy/crawlScope.js';
import type { CrawlPolicyOptions } from '../actors/crawlPolicy/crawlPolicyOptions.js';
import { weightFunction, type WeightFunction } from '../actors/metrics/weights.js';
import type { Broker } from '../runtime/brokers/index.js';
import { hostOf } from '../index.js';
import { startWebIndex, type WebIndex } from '../topology/webIndex.js';
import { aborted, JobWatchdog, raceStops, startOptions, type JobLifecycleOptions } from '../jobs/watchdog.js';
import { openJobRun } from './jobRun.js';
import { QueryService } from '../query/queryService.js';
import type { QueryServer } from '../query/server.js';
/** The query server's module (fastify and its plugins), loaded when a command serves: most CLI processes (workers, jobs) never do. */
const queryServer = () => import('../query/server.js');
import { addTokenOptions, resolveToken } from './serveOptions.js';
import { cliLogger, dataDir, MAX_PARTITIONS, parseWeights, partitionCount, nonNegativeInt, positiveInt, positiveNumber } from './options.js';
import { clusterName, clusterUrl } from './worker.js';
import { openClusterQueryServer, untilSignal, type ClusterQueryServer } from './query.js';
import { WEB_INDEX_CLUSTER } from './rankCluster.js';
import { crawlOnClusterCli } from './crawlCluster.js';
import { canonicalSeeds, type CrawlSummary } from '../jobs/clusterCrawl.js';
import { writeScoresFile } from './scoresFile.js';
import { crawlGapsOf, describeCrawlGaps } from '../jobs/crawlGaps.js';
import { weightsLabel } from './jobOptions.js';

/** Options of `crawlSites`. */
export interface CrawlSitesOptions extends Omit<JobLifecycleOptions, 'stall'> {
  /** Start URLs (any form `canonicalUrl` accepts). */
  readonly seeds: readonly string[];
  /** `host[:port]` -> `address:port`: hosts reached without DNS (and allowed on loopback/private addresses). */
  readonly hostMap?: ReadonlyMap<string, string>;
  /**
   * Hosts crawled. Default: the hosts of the seeds. URLs of other hosts are stored as
   * `out-of-scope` frontier entries on their partitions (with their backlinks), never fetched.
   */
  readonly allowHosts?: readonly string[];
  /** Crawl every host reached (no allow-list). Default false. */
  readonly anyHost?: boolean;
  /** Most page requests (robots.txt not counted); the rest stays queued in the frontier. Default: no limit. */
  readonly maxPages?: number;
  readonly partitions: number;
  readonly dataDir: string;
  readonly broker: Broker;
  readonly weigh: WeightFunction;
  readonly log: Logger;
  /** Crawler actors. Default 4. */
  readonly crawlers?: number;
  /** Politeness, recrawl (scope and budget come from the fields above). */
  readonly policy?: Omit<CrawlPolicyOptions, 'scope' | 'budget' | 'robots'>;
  /** Most distinct outlinks stored per page (the rest left out, the truncation recorded). Default 10,000. */
  readonly maxOutlinks?: number;
  /** Largest body in bytes. Default 8 MiB. */
  readonly maxBodyBytes?: number;
  /** User-Agent header. Default `DEFAULT_USER_AGENT`. */
  readonly userAgent?: string;
  /** robots.txt product token (RFC 9309 section 2.2.1), separate from the User-Agent. Default `shardflow`. */
  readonly robotsToken?: string;
  /** Most redirect hops of a chain (`HttpFetcherOptions.maxRedirects`). Default 10. */
  readonly maxRedirects?: number;
  /** Per-fetch inactivity timeout in ms. Default 10000. */
  readonly timeoutMs?: number;
  /** Run the metric to convergence after the crawl. Default true. */
  readonly rank?: boolean;
  /** Leave the index running and return it (the caller stops it). Default false. */
  readonly keepOpen?: boolean;
  /** Called about once a second while crawling. */
  readonly onProgress?: (p: { pages: number; seconds: number }) => void;
}

/** What `crawlSites` did. */
export interface CrawlSitesResult extends CrawlSummary {
  readonly scope: string;
  readonly rankSeconds: number;
  readonly converged: boolean | null;
  /** The running index when `keepOpen`. */
  readonly index?: WebIndex;
}

/**
 * Crawls real sites from seeds through the partition actors until the crawl is quiet
 * (every reachable in-scope URL fetched once, or the budget spent), then runs the metric
 * to convergence and summarises. Polite by default: one request per host at a time, one
 * second between them, robots.txt obeyed, pages crawled again after a week.
 *
 * @throws InvalidArgumentError when no seed is valid
 */
export async function crawlSites(options: CrawlSitesOptions): Promise<CrawlSitesResult> {
  const { seeds, refused } = canonicalSeeds(options.seeds);
  if (seeds.length === 0) throw new CommanderArgumentError(`no valid seed: ${refused.map((r) => r.reason).join('; ') || 'none given'}`);
  const scope = options.anyHost ? anyHost : hostAllowList([...seeds.map((s) => hostOf(s)), ...(options.allowHosts ?? [])]);
  const index = await startWebIndex({
    partitions: options.partitions,
    dataDir: options.dataDir,
    broker: options.broker,
    weigh: options.weigh,
    log: options.log,
    crawlers: options.crawlers ?? 4,
    ...(options.maxOutlinks !== undefined ? { maxOutlinksPerPage: options.maxOutlinks } : {}),
    fetcher: {
      ...(options.hostMap ? { hostMap: options.hostMap } : {}),
      maxBodyBytes: options.maxBodyBytes ?? 8 * 1024 * 1024,
      ...(options.timeoutMs ? { timeoutMs: options.timeoutMs } : {}),
      ...(options.userAgent !== undefined ? { userAgent: options.userAgent } : {}),
      ...(options.robotsToken !== undefined ? { robotsToken: options.robotsToken } : {}),
      ...(options.maxRedirects !== undefined ? { maxRedirects: options.maxRedirects } : {}),
    },
    crawlPolicy: {
      maxInFlightPerHost: 1,
      minDelayMs: 1000,
      ...options.policy,
      scope,
      ...(options.maxPages !== undefined ? { budget: new CrawlBudget(options.maxPages) } : {}),
    },
    ...startOptions(options),
  });
  let ok = false;
  let phase = 'crawling';
  const watchdog = new JobWatchdog(index, { log: options.log, phase: () => phase }).start();
  const stops = [watchdog.failed, aborted(options.signal)];
  try {
    const t0 = performance.now();
    const timer = options.onProgress
      ? setInterval(() => {
        index.counts().then((c) => options.onProgress?.({ pages: c.reduce((a, x) => a + x.pages, 0), seconds: (performance.now() - t0) / 1000 }), () => undefined);
      }, 1000)
      : undefined;
    try {
      await raceStops(index.seed(seeds).then(() => index.quiescence()), ...stops);
    } finally {
      if (timer) clearInterval(timer);
    }
    phase = 'metric rounds';
    const crawlSeconds = (performance.now() - t0) / 1000;
    const t1 = performance.now();
    // thresholdFactor 0: plain rounds. The adaptive threshold (residual / pages) never pushes
    // the many small residuals of URLs without a page (out-of-scope and blocked link
    // targets), so its rounds stall above the tolerance on real crawls.
    const converged = options.rank === false ? null : (await raceStops(index.converge({ thresholdFactor: 0 }), ...stops)).converged;
    const rankSeconds = (performance.now() - t1) / 1000;
    const counts = await index.counts();
    const frontier: Record<string, number> = {};
    for (let p = 0; p < options.partitions; p++) {
      for (const [state, n] of Object.entries(await (await index.view(p)).frontierStates())) frontier[state] = (frontier[state] ?? 0) + n;
    }
    const gaps = await crawlGapsOf(index);
    const service = new QueryService({ partitioner: index.partitioner, view: (p) => index.view(p), clock: index.system.clock });
    const [hosts, top] = await Promise.all([service.topHosts({ limit: 100 }), service.topPages({ limit: 10 })]);
    ok = true;
    return {
      seeds,
      refused,
      scope: scope.description,
      pages: counts.reduce((a, c) => a + c.pages, 0),
      outlinks: counts.reduce((a, c) => a + c.outlinks, 0),
      backlinks: counts.reduce((a, c) => a + c.backlinks, 0),
      frontier,
      gaps,
      hosts: hosts.top,
      top: top.top,
      crawlSeconds,
      rankSeconds,
      converged,
      ...(options.keepOpen ? { index } : {}),
    };
  } finally {
    watchdog.stop();
    if (!ok || !options.keepOpen) {
      const stopped = await index.stop();
      options.onStopped?.({ ...stopped, brokerDataLost: watchdog.brokerDataLost });
    }
  }
}

/**
 * The exit code of a crawl that ran to its end: 1 when its index holds no page (every seed
 * refused, unreachable, or its robots.txt unreachable: the summary's gaps say which; a script
 * going on to `serve` or `query` would meet an empty index) or the metric did not converge,
 * else 0. Says why on stderr.
 */
function crawlExitCode(summary: { readonly pages: number; readonly converged: boolean | null }): number {
  if (summary.pages === 0) {
    process.stderr.write('shardflow crawl: no page was stored (see "not fetched with an answer" and the refused seeds above); exit 1\n');
    return 1;
  }
  if (summary.converged === false) {
    // Found by a new user: exit 1 and nothing said.
    process.stderr.write('shardflow crawl: the pages are stored, but the link metric did not converge within its round limit (1,000 rounds): the scores are not within the tolerance; exit 1 (--no-rank skips the metric)\n');
    return 1;
  }
  return 0;
}

/** Parses `host=address:port` of `--map`. @throws commander's InvalidArgumentError */
export function hostMapEntry(value: string, previous: Map<string, string> = new Map()): Map<string, string> {
  const m = /^([^=\s]+)=([^=\s]+):(\d{1,5})$/.exec(value.trim());
  if (!m || Number(m[3]) > 65535) throw new CommanderArgumentError(`expected host=address:port (e.g. docs.example=127.0.0.1:8080), got ${JSON.stringify(value)}`);
  const next = new Map(previous);
  next.set(m[1]!.toLowerCase(), `${m[2]}:${m[3]}`);
  return next;
}

/**
 * Reads a host map file (`--map-file`): one `host=address:port` per line, blank lines and
 * lines starting with `#` skipped (what `hostMapLines` writes).
 * @throws commander's InvalidArgumentError naming the line that is not an entry; the file system's errors
 */
export function readHostMapFile(file: string, previous: Map<string, string> = new Map()): Map<string, string> {
  let map = previous;
  readFileSync(file, 'utf8').split('\n').forEach((line, i) => {
    const entry = line.trim();
    if (entry === '' || entry.startsWith('#')) return;
    try {
      map = hostMapEntry(entry, map);
    } catch (err) {
      throw new CommanderArgumentError(`${file}:${i + 1}: ${(err as Error).message}`);
    }
  });
  return map;
}

/** A host map as the lines of a `--map-file` (`host=address:port`, one per line). */
export function hostMapLines(map: ReadonlyMap<string, string>): string {
  return [...map].map(([host, address]) => `${host}=${address}\n`).join('');
}

/** Checks `--robots-token` (`checkRobotsToken`). @throws commander's InvalidArgumentError */
export function robotsTokenOption(value: string): string {
  try {
    return checkRobotsToken(value);
  } catch (err) {
    throw new CommanderArgumentError((err as Error).message);
  }
}

/** Parses a count >= 0. @throws commander's InvalidArgumentError */
export function count(value: string): number {
  return nonNegativeInt(value);
}

/**
 * Adds the options of how a crawl fetches and how polite it is, shared by `crawl` and
 * `worker --web-index --crawl`: --per-host, --delay-ms, --recrawl-hours, --gone-recrawl-hours, --user-agent,
 * --robots-token, --max-redirects, --timeout-ms, --max-body-bytes (defaults: polite).
 * @param helpPrefix put before each help text (e.g. `with --crawl: `)
 */
export function addFetchPolicyOptions(command: Command, helpPrefix = ''): Command {
  return command
    .option('--per-host <n>', `${helpPrefix}requests in flight per host`, positiveInt, 1)
    .option('--delay-ms <ms>', `${helpPrefix}least time between two requests to a host (robots.txt Crawl-delay raises it)`, count, 1000)
    .option('--recrawl-hours <h>', `${helpPrefix}crawl a fetched page again after this many hours (also the pages earlier runs fetched)`, positiveNumber, 168)
    .option('--recrawl', `${helpPrefix}crawl again, once, every page the data dir's earlier runs fetched (a site that changed), whatever its schedule`)
    .option('--gone-recrawl-hours <h>', `${helpPrefix}crawl a page that answered 404 or 410 again after this many hours (gone twice, it is deleted with its links)`, positiveNumber, 24)
    .option('--user-agent <text>', `${helpPrefix}User-Agent header of every request`, DEFAULT_USER_AGENT)
    .option('--robots-token <token>', `${helpPrefix}product token matched against robots.txt User-agent lines and <meta name> (letters, _ and -; RFC 9309)`, robotsTokenOption, DEFAULT_ROBOTS_TOKEN)
    .option('--max-redirects <n>', `${helpPrefix}most hops of a redirect chain; a longer chain or a loop is an error on its pages, with no outlinks`, count, DEFAULT_MAX_REDIRECTS)
    .option('--timeout-ms <ms>', `${helpPrefix}time to headers and between body chunks`, positiveInt, 10_000)
    .option('--max-body-bytes <n>', `${helpPrefix}largest body read; larger pages are stored as oversized`, positiveInt, 8 * 1024 * 1024);
}

/** Collects a repeatable option's values. */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** `shardflow crawl`: crawl real sites from seeds, politely, then rank them. */
export function crawlCommand(setExit: (code: number) => void): Command {
  const command = addFetchPolicyOptions(new Command('crawl')
    .description('crawl real sites from seed URLs (politeness per host, robots.txt, recrawl), store pages, links and backlinks in the partitions, then compute the link metric')
    .requiredOption('--seed <url...>', '(required) start URLs; their hosts are the crawl scope unless --allow-host or --any-host')
    .option('--map <host=address:port>', 'reach a host at an address without DNS (repeatable); mapped hosts may be on loopback or private addresses', hostMapEntry, new Map<string, string>())
    .option('--max-pages <n>', 'most page requests; the rest stays queued in the frontier', count)
    .option('--allow-host <host>', 'also crawl this host (repeatable); other hosts\' URLs are recorded in the frontier, not fetched', collect, [])
    .option('--any-host', 'crawl every host reached (no allow-list)', false)
    .option('--partitions <n>', `number of partitions (1..${MAX_PARTITIONS})`, partitionCount, 16)
    .option('--data-dir <dir>', 'folder for the partitions\' RocksDB stores (default: a fresh temp folder)')
    .option('--crawlers <n>', 'crawler actors', positiveInt, 4))
    .option('--max-outlinks <n>', 'most distinct outlinks stored per page; a page with more keeps its first ones and says so', positiveInt, 10_000)
    .option('--weights <name>', 'link weights: reasonable, uniform, or a weight table .json (docs/crawling.md)', parseWeights, 'reasonable')
    .option('--no-rank', 'skip the metric after the crawl')
    .option('--serve <port>', 'after the crawl (with --cluster: from the start), serve the query API on 127.0.0.1:<port> until interrupted (0: any port)', count);
  return addTokenOptions(command, 'server')
    .option('--json', 'print the summary as one JSON object', false)
    .option('--broker <spec>', 'broker: memory, or with --cluster the workers\' redis://host:port or pulsar://host:port (default there: the --cluster Redis)', 'memory')
    .option('--cluster <url>', 'crawl on the workers of a cluster (`shardflow worker --web-index --crawl`) coordinated by this Redis, as a client: the same command started again resumes (docs/cluster.md)', clusterUrl)
    .option('--cluster-name <name>', `with --cluster: the cluster's name (default ${WEB_INDEX_CLUSTER})`, clusterName)
    .option('--key-prefix <prefix>', "with --cluster: prefix of the cluster's Redis keys", 'sfc:')
    .option('--out <file>', 'with --cluster: also write every score as url<TAB>score lines, highest first')
    .option('--tolerance <x>', 'with --cluster: L1 tolerance of the metric', positiveNumber)
    .option('--log-level <level>', 'pino log level on stderr', 'warn')
    .action(async (opts, cmd: Command) => {
      if (opts.cluster !== undefined) {
        await crawlClusterAction(opts, cmd, setExit);
        return;
      }
      for (const [o, flag] of [['clusterName', '--cluster-name'], ['keyPrefix', '--key-prefix'], ['out', '--out'], ['tolerance', '--tolerance']] as const) {
        if (cmd.getOptionValueSource(o) === 'cli') throw new CommanderArgumentError(`${flag} goes with --cluster`);
      }
      if (opts.serve === undefined && (opts.token !== undefined || opts.tokenFile !== undefined)) throw new CommanderArgumentError('--token and --token-file apply to --serve only');
      const token = opts.serve !== undefined ? resolveToken(opts) : undefined;
      const log = cliLogger(opts.logLevel);
      // Seeds checked before the data dir is opened: a run with no valid seed leaves none behind, nor a record of a run.
      const { seeds, refused } = canonicalSeeds(opts.seed as string[]);
      if (seeds.length === 0) throw new CommanderArgumentError(`no valid seed: ${refused.map((r) => r.reason).join('; ') || 'none given'}`);
      const dir = dataDir(opts.dataDir);
      const run = await openJobRun({ ...opts, dataDir: dir, update: true }, { kind: 'crawl', description: `from ${(opts.seed as string[]).join(' ')}`, weights: weightsLabel(opts.weights) }, log);
      const broker = run.broker;
      let server: QueryServer | undefined;
      let result: CrawlSitesResult | undefined;
      try {
        if (!opts.json) console.error(`shardflow crawl: ${opts.partitions} partitions, data in ${dir}`);
        result = await crawlSites({
          seeds: opts.seed,
          hostMap: opts.map,
          allowHosts: opts.allowHost,
          anyHost: opts.anyHost,
          ...(opts.maxPages !== undefined ? { maxPages: opts.maxPages } : {}),
          partitions: opts.partitions,
          dataDir: dir,
          broker,
          weigh: weightFunction(opts.weights),
          log,
          crawlers: opts.crawlers,
          policy: { maxInFlightPerHost: opts.perHost, minDelayMs: opts.delayMs, recrawlIntervalMs: opts.recrawlHours * 3600_000, goneRecrawlMs: opts.goneRecrawlHours * 3600_000, ...(opts.recrawl ? { recrawlFetchedBefore: Date.now() } : {}) },
          maxBodyBytes: opts.maxBodyBytes,
          maxOutlinks: opts.maxOutlinks,
          timeoutMs: opts.timeoutMs,
          userAgent: opts.userAgent,
          maxRedirects: opts.maxRedirects,
          robotsToken: opts.robotsToken,
          rank: opts.rank,
          keepOpen: opts.serve !== undefined,
          ...run.job,
          ...(opts.json ? {} : { onProgress: (p: { pages: number; seconds: number }) => console.error(`  ${p.seconds.toFixed(0)} s: ${p.pages} pages stored`) }),
        });
        const { index, ...summary } = result;
        if (opts.json) console.log(JSON.stringify({ dataDir: dir, ...summary }));
        else printSummary(dir, summary);
        if (index) {
          const service = new QueryService({ partitioner: index.partitioner, view: (p) => index.view(p), clock: index.system.clock });
          server = await (await queryServer()).startQueryServer({ service, port: opts.serve, ...(token ? { token } : {}), dropHost: (h) => index.dropHost(h) });
          console.error(`query API on ${server.url} (Ctrl-C stops)`);
          await new Promise<void>((resolve) => {
            process.once('SIGINT', resolve);
            process.once('SIGTERM', resolve);
          });
        }
        setExit(crawlExitCode(summary));
      } finally {
        await server?.close();
        if (result?.index) run.job.onStopped({ ...(await result.index.stop()), brokerDataLost: false }); // the crawl finished: its watchdog saw no loss
        await run.close();
      }
    });
}

/** The options of `crawl` that the workers of a cluster hold (their attribute names): refused with --cluster. */
const WORKER_SIDE = ['map', 'maxPages', 'allowHost', 'anyHost', 'dataDir', 'crawlers', 'perHost', 'delayMs', 'recrawlHours', 'goneRecrawlHours', 'recrawl', 'userAgent', 'robotsToken', 'maxRedirects', 'timeoutMs', 'maxBodyBytes', 'maxOutlinks', 'weights'] as const;

/**
 * `crawl --cluster`: the crawl as a client of a cluster's workers (`crawlOnClusterCli`);
 * prints the summary as `crawl` does (or `--json`), writes `--out`. A signal stops the
 * client only: the workers keep crawling, and the same command resumes.
 */
async function crawlClusterAction(opts: Record<string, any>, cmd: Command, setExit: (code: number) => void): Promise<void> {
  const given = WORKER_SIDE.filter((o) => cmd.getOptionValueSource(o) === 'cli');
  if (given.length > 0) {
    throw new CommanderArgumentError(`${given.map((o) => `--${o.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`).join(', ')} do${given.length === 1 ? 'es' : ''} not apply with --cluster: the workers hold the partitions and crawl (give them to \`shardflow worker --web-index --crawl\`)`);
  }
  // The workers' broker: --broker, or the cluster's Redis (as `serve --cluster`).
  if (cmd.getOptionValueSource('broker') !== 'cli') opts.broker = opts.cluster;
  const clusterNameValue: string = opts.clusterName ?? WEB_INDEX_CLUSTER;
  const stop = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => stop.abort(Object.assign(new Error(`${signal}: the client stopped (the workers keep crawling: run the same command again to resume)`), { code: 'SF_ERR_INTERRUPTED', signal }));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  // --serve: the query API of the cluster from the start (each read asked of its key's owner,
  // so it answers during the crawl and while partitions move), until interrupted after it.
  let served: ClusterQueryServer | undefined;
  let crawled = false;
  try {
    if (opts.serve !== undefined) {
      served = await openClusterQueryServer({ ...opts, clusterName: clusterNameValue, host: '127.0.0.1', port: opts.serve, allowedHost: [], insecure: false, waitMs: 300_000 }, resolveToken(opts), stop.signal);
      console.error(`shardflow crawl: query API on ${served.url} during the crawl (each read asked of its key's owner)`);
    }
    const t0 = performance.now();
    const result = await crawlOnClusterCli({
      cluster: opts.cluster, clusterName: clusterNameValue, keyPrefix: opts.keyPrefix, broker: opts.broker, seeds: opts.seed, rank: opts.rank,
      log: cliLogger(opts.logLevel), signal: stop.signal,
      say: (line) => process.stderr.write(`shardflow crawl: ${line}\n`),
      ...(opts.tolerance !== undefined ? { tolerance: opts.tolerance } : {}),
      ...(cmd.getOptionValueSource('partitions') === 'cli' ? { partitions: opts.partitions } : {}),
      ...(opts.json ? {} : { onProgress: (p: { pages: number; seconds: number }) => console.error(`  ${p.seconds.toFixed(0)} s: ${p.pages} pages stored`) }),
    });
    if (opts.out !== undefined) await writeScoresFile(opts.out, result.scores);
    const converged = result.converge === null ? null : result.converge.converged;
    const { scores: _scores, converge: _converge, convergeSeconds, ...rest } = result;
    const summary = { ...rest, rankSeconds: convergeSeconds, converged };
    const where = `cluster ${clusterNameValue}`;
    if (opts.json) console.log(JSON.stringify({ cluster: clusterNameValue, ...summary, seconds: (performance.now() - t0) / 1000 }));
    else printSummary(where, summary);
    setExit(crawlExitCode(summary));
    crawled = true;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    if (!crawled) await served?.close();
  }
  if (served) {
    try {
      console.log(`query API on ${served.url} (${served.partitions} partitions of cluster ${clusterNameValue}, each read asked of its owner)`);
      await untilSignal();
    } finally {
      await served.close();
    }
  }
}

function printSummary(dir: string, r: Omit<CrawlSitesResult, 'index'>): void {
  console.log(`seeds: ${r.seeds.join(' ')}`);
  for (const { url, reason } of r.refused) console.log(`refused seed ${url}: ${reason}`);
  console.log(`scope: ${r.scope}`);
  console.log(`pages stored: ${r.pages}; links: ${r.outlinks}; backlinks: ${r.backlinks}`);
  console.log(`frontier: ${Object.entries(r.frontier).map(([s, n]) => `${s} ${n}`).join(', ')}`);
  if (r.gaps.length > 0) console.log(`not fetched with an answer (retried later, or never: out of scope):\n${describeCrawlGaps(r.gaps).join('\n')}`);
  console.log(`crawl ${r.crawlSeconds.toFixed(1)} s; metric ${r.rankSeconds.toFixed(1)} s${r.converged === null ? ' (skipped)' : r.converged ? ' (converged)' : ' (NOT converged)'}`);
  console.log('hosts (pages, authority):');
  for (const h of r.hosts.slice(0, 20)) console.log(`  ${h.host}: ${h.pages}, ${h.authority.toFixed(4)}`);
  console.log('top pages:');
  for (const t of r.top) console.log(`  ${t.score.toFixed(6)}  ${t.url}`);
  console.log(dir.startsWith('cluster ') ? `data: in the workers of ${dir}` : `data: ${dir}`);
}
