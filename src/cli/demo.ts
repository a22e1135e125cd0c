import { existsSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command, Option } from 'commander';
import cliProgress from 'cli-progress';
import { readGraph, readScores, type WebGraph } from '../replay/graphFile.js';
import { crawlGraph } from '../jobs/crawlGraph.js';
import { l1Distance } from '../jobs/rankGraph.js';
import { canonicalUrl } from '../actors/crawler/canonicalUrl.js';
import { ChaosPolicy, hostOf, InvalidArgumentError } from '../index.js';
import { weightFunction } from '../actors/metrics/weights.js';
import { chaosKinds, cliLogger, positiveInt } from './options.js';
import { graphInput, openJobRun } from './jobRun.js';
import { clusterUrl } from './worker.js';
import { runDemoOnCluster } from './demoCluster.js';
import { openInspection } from './inspect.js';
import { withJobOptions, weightsLabel } from './jobOptions.js';
import { describeCrawlGaps } from '../jobs/crawlGaps.js';
import type { CrawlGap } from '../query/partitionView.js';

const here = dirname(fileURLToPath(import.meta.url));
/** The bundled graphs `--graph` names: each folder of examples/data with a pages.txt and a links.tsv. */
const bundledDir = resolve(here, '../../examples/data');
/**
 * The default graph: polblogs (Adamic and Glance 2005, examples/data/polblogs/README.md),
 * 1,489 pages over 1,451 hosts, so that its pages spread over every partition (all pages of a
 * host live on one partition: hollins' 4 hosts filled 3 of 16).
 */
export const DEMO_DEFAULT_GRAPH = 'polblogs';

/** Names of the graphs bundled in examples/data, sorted. */
export function bundledGraphs(): string[] {
  if (!existsSync(bundledDir)) return [];
  return readdirSync(bundledDir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(join(bundledDir, d.name, 'pages.txt')) && existsSync(join(bundledDir, d.name, 'links.tsv')))
    .map((d) => d.name)
    .sort();
}

/**
 * The graph files a demo run crawls: `--pages` and `--links` when given (both), else the
 * bundled graph `--graph` names (default DEMO_DEFAULT_GRAPH).
 * @throws InvalidArgumentError when only one of `--pages`, `--links` is given
 */
export function demoGraphFiles(opts: { readonly graph: string; readonly pages?: string; readonly links?: string }): { pages: string; links: string } {
  if (opts.pages !== undefined && opts.links !== undefined) return { pages: opts.pages, links: opts.links };
  if (opts.pages !== undefined || opts.links !== undefined) {
    throw new InvalidArgumentError(`--pages and --links go together (your own graph), got only ${opts.pages !== undefined ? '--pages' : '--links'}; or name a bundled graph with --graph (${bundledGraphs().join(', ')})`);
  }
  return { pages: join(bundledDir, opts.graph, 'pages.txt'), links: join(bundledDir, opts.graph, 'links.tsv') };
}

/** `shardflow demo`: crawl a real web graph served from this process, then rank it. */
export function demoCommand(setExit: (code: number) => void): Command {
  return withJobOptions(
    new Command('demo')
      .description('crawl a real web graph replayed over HTTP through partition actors, RocksDB and the broker, then compute the link metric')
      .addOption(
        new Option('--graph <name>', 'a graph bundled in examples/data: polblogs (political blogs, 1,489 pages over 1,451 hosts) or hollins (the hollins.edu crawl of 2004, 6,012 pages over 4 hosts)')
          .choices(bundledGraphs())
          .default(DEMO_DEFAULT_GRAPH)
          .conflicts(['pages', 'links']),
      )
      .option('--pages <file>', 'pages.txt of your own graph (one URL per line; .xz accepted), with --links, instead of --graph')
      .option('--links <file>', 'links.tsv of your own graph (source<TAB>target; .xz accepted), with --pages')
      .option('--reference <file>', 'pagerank.tsv to compare uniform scores with (default: the one next to the pages.txt)')
      .option('--crawlers <n>', 'crawler actors', positiveInt, 4)
      .option('--update', 'on a --data-dir that holds another graph: crawl this one into it (pages it does not list are kept)')
      .option('--workers <n>', 'run on a laptop cluster instead: this many `shardflow worker --web-index --crawl` processes coordinated through Redis (started if silent), the graph crawled from a replay server in this process and ranked on them as a client (docs/cluster.md)', positiveInt)
      .option('--cluster <url>', "with --workers: the cluster's Redis (default: the broker's Redis, or redis://127.0.0.1:6379)", clusterUrl),
    { default: 'uniform', help: 'link weights: uniform (PageRank), reasonable, or a weight table .json' },
  )
    .action(async (opts, command: Command) => {
      const log = cliLogger(opts.logLevel);
      const files = demoGraphFiles(opts);
      const graph = await readGraph(files.pages, files.links);
      if (opts.workers !== undefined) {
        setExit(await demoOnCluster(opts, command, graph, files.pages, log));
        return;
      }
      if (command.getOptionValueSource('cluster') === 'cli') throw new InvalidArgumentError('--cluster goes with --workers');
      const run = await openJobRun(opts, { ...(await graphInput('crawl', files.pages, files.links)), weights: weightsLabel(opts.weights) }, log);
      const dir = run.dir.path;
      console.log(`shardflow demo: ${opts.partitions} partitions, data in ${dir}${opts.dataDir !== undefined ? '' : ' (removed at the end; --data-dir keeps it)'}`);
      console.log(`graph: ${graph.pages.length} pages, ${graph.linkCount} link lines (${files.pages})`);
      const broker = run.broker;
      const inspection = await openInspection(opts, command).catch(async (err) => {
        await run.close();
        throw err;
      });
      const chaos = opts.chaos > 0 ? ChaosPolicy.create({ rate: opts.chaos, seed: 42, kinds: chaosKinds }) : undefined;
      const bar = new cliProgress.SingleBar({ format: 'crawl {bar} {value}/{total} pages | {phase}', hideCursor: true }, cliProgress.Presets.shades_classic);
      let timer: NodeJS.Timeout | undefined;
      const t0 = performance.now();
      try {
        const result = await crawlGraph({
          graph,
          partitions: opts.partitions,
          dataDir: dir,
          broker,
          ...run.job,
          stall: { onStall: (report) => bar.update({ phase: report }) },
          weigh: weightFunction(opts.weights),
          crawlers: opts.crawlers,
          tolerance: opts.tolerance,
          log,
          ...(chaos ? { chaos } : {}),
          onStarted(index) {
            inspection?.attach(index);
            bar.start(graph.pages.length, 0, { phase: 'crawling' });
            timer = setInterval(() => {
              index.counts().then((c) => bar.update(c.reduce((a, x) => a + x.pages, 0)), () => undefined);
            }, 250);
          },
          onRound(r) {
            if (timer) { clearInterval(timer); timer = undefined; bar.update(graph.pages.length, { phase: 'ranking' }); }
            bar.update({ phase: `metric round ${r.round}: pushed ${r.pushed}, messages ${r.messages}, error bound ${r.bound.toExponential(2)}` });
          },
        });
        if (timer) clearInterval(timer);
        bar.stop();
        const elapsed = (performance.now() - t0) / 1000;
        console.log(`\npages fetched:    ${result.pages}`);
        console.log(`links stored:     ${result.outlinks}`);
        console.log(`backlinks stored: ${result.backlinks}`);
        console.log(`crawl: ${result.crawlSeconds.toFixed(2)} s; metric: ${result.converge.rounds} rounds, ${result.converge.pushes} pushes, ${result.converge.messages} messages, ${result.convergeSeconds.toFixed(2)} s; ${result.converge.converged ? 'converged' : 'NOT converged'}`);
        for (const { url, reason } of result.rejectedSeeds) console.log(`refused seed ${url}: ${reason}`);
        const complete = reportGaps(result.gaps);
        console.log('\nper partition (pages / outlinks / backlinks):');
        console.log(result.counts.map((c, p) => `  p${p}: ${c.pages} / ${c.outlinks} / ${c.backlinks}`).join('\n'));
        const hosts = new Set(graph.pages.map((u) => { try { return hostOf(u); } catch { return ''; } })).size;
        const used = result.counts.filter((c) => c.pages > 0).length;
        if (used < opts.partitions) {
          console.log(`  (${used} of ${opts.partitions} partitions hold pages: all pages of a host live on one partition, and this graph has ${hosts} hosts;`);
          console.log(`   a graph with many more hosts than partitions spreads over all of them: the default, --graph ${DEMO_DEFAULT_GRAPH}, has 1,451)`);
        }
        await printScores(result.scores, opts, files.pages, true);
        console.log(`\nsupervision tree:\n${foldIdlePartitions(result.tree, new Set(result.counts.flatMap((c, p) => (c.pages > 0 ? [p] : []))))}`);
        console.log(`\n(pushes: pages whose residual rank was passed on to their outlinks; a round is one push per partition and the messages between them)`);
        console.log(`done in ${elapsed.toFixed(2)} s: ${result.pages} pages, ${result.outlinks} links and backlinks, metric ${result.converge.converged ? 'converged' : 'NOT converged'} in ${result.converge.rounds} rounds`);
        if (result.converge.converged && complete) run.completed();
        setExit(result.converge.converged && complete ? 0 : 1);
      } finally {
        await inspection?.close();
        if (timer) clearInterval(timer);
        bar.stop();
        await run.close();
      }
    });
}

/**
 * The supervision tree text with the blocks of partitions that hold no page and never
 * restarted an actor replaced by one line, so that the demo's summary is not buried.
 */
function foldIdlePartitions(tree: string, withPages: ReadonlySet<number>): string {
  const out: string[] = [];
  let block: string[] = [];
  let folded = 0;
  let noted = false;
  const flush = () => {
    if (block.length === 0) return;
    const p = Number(/^\s*p(\d+) \[partition\]/.exec(block[0]!)?.[1]);
    if (!withPages.has(p) && block.every((l) => / restarts=0\b/.test(l))) folded++;
    else out.push(...block);
    block = [];
  };
  for (const line of tree.split('\n')) {
    if (/^\s*p\d+ \[partition\]/.test(line)) {
      flush();
      block = [line];
    } else if (block.length > 0 && line.search(/\S/) > block[0]!.search(/\S/)) block.push(line);
    else {
      const indent = block[0]?.search(/\S/) ?? 4;
      flush();
      if (folded > 0 && !noted) {
        out.push(`${' '.repeat(indent)}(${folded} partitions without pages or restarts not shown)`);
        noted = true;
      }
      out.push(line);
    }
  }
  flush();
  return out.join('\n');
}

/**
 * `demo --workers N`: the demo graph crawled and ranked on N worker processes
 * (`runDemoOnCluster`: a replay server here, crawl policies and crawlers in the workers), with
 * the one-process demo's summary lines (counts, top 10, L1 to the reference).
 * @returns the exit code: 0 when the metric converged and no URL was left unfetched
 * @throws InvalidArgumentError for options that apply to one process only
 */
async function demoOnCluster(opts: Record<string, any>, command: Command, graph: WebGraph, pagesFile: string, log: ReturnType<typeof cliLogger>): Promise<number> {
  for (const o of ['chaos', 'inspectPort', 'update']) {
    if (command.getOptionValueSource(o) === 'cli') throw new InvalidArgumentError(`--${o.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} runs in one process only, not with --workers`);
  }
  const broker: string = command.getOptionValueSource('broker') === 'cli' ? opts.broker : (opts.cluster ?? 'redis://127.0.0.1:6379');
  if (broker === 'memory') throw new InvalidArgumentError('--workers needs a broker that crosses processes: --broker redis://… or pulsar://…');
  const cluster: string = opts.cluster ?? (broker.startsWith('redis://') ? broker : 'redis://127.0.0.1:6379');
  const t0 = performance.now();
  console.log(`shardflow demo on ${opts.workers} worker processes: ${opts.partitions} partitions`);
  console.log(`graph: ${graph.pages.length} pages, ${graph.linkCount} link lines (${pagesFile})`);
  const result = await runDemoOnCluster({
    workers: opts.workers, partitions: opts.partitions, cluster, broker, weights: opts.weights, tolerance: opts.tolerance, graph, log, crawlers: opts.crawlers,
    ...(opts.dataDir !== undefined ? { dataDir: opts.dataDir } : {}),
    say: (line) => console.log(line),
  });
  console.log(`\npages fetched:    ${result.pages}`);
  console.log(`links stored:     ${result.outlinks}`);
  console.log(`backlinks stored: ${result.backlinks}`);
  const metric = result.converge!; // the demo always ranks
  console.log(`crawl: ${result.crawlSeconds.toFixed(2)} s; metric: ${metric.rounds} rounds, ${metric.pushes} pushes, ${metric.messages} messages, ${result.convergeSeconds.toFixed(2)} s; ${metric.converged ? 'converged' : 'NOT converged'}`);
  for (const { url, reason } of result.refused) console.log(`refused seed ${url}: ${reason}`);
  const complete = reportGaps(result.gaps);
  await printScores(result.scores, { weights: opts.weights, reference: opts.reference }, pagesFile, true);
  console.log(`done in ${((performance.now() - t0) / 1000).toFixed(2)} s: ${result.pages} pages, ${result.outlinks} links and backlinks, metric ${metric.converged ? 'converged' : 'NOT converged'} in ${metric.rounds} rounds`);
  return metric.converged && complete ? 0 : 1;
}

/**
 * Prints the URLs a demo crawl left unfetched (`INCOMPLETE: ...`, one line per state and
 * reason). A replayed graph answers every page, so such a URL is a fault of the run (a
 * timeout under load), not of the graph: the demo then exits 1.
 * @returns true when there is none
 */
function reportGaps(gaps: readonly CrawlGap[]): boolean {
  const urls = gaps.reduce((a, g) => a + g.urls, 0);
  if (urls > 0) console.log(`INCOMPLETE: the crawl ended with ${urls} URLs not fetched with an answer (their retry is scheduled later):\n${describeCrawlGaps(gaps).join('\n')}`);
  return urls === 0;
}

/**
 * The demo's score lines: the top 10 pages and, for uniform weights with a reference file
 * (`--reference`, or pagerank.tsv beside the pages), the L1 distance to it.
 * @param crawled the scores are keyed by the crawl's URL keys (`canonicalUrl`): the reference's
 *   URLs are put in that form; else (a graph loaded as written) they are compared as written
 */
async function printScores(scores: ReadonlyArray<readonly [string, number]>, opts: { readonly reference?: string | undefined; readonly weights: string }, pagesFile: string, crawled: boolean): Promise<void> {
  console.log('\ntop 10 pages by score:');
  for (const [url, score] of scores.slice(0, 10)) console.log(`  ${score.toFixed(6)}  ${url}`);
  const reference = opts.reference ?? join(dirname(pagesFile), 'pagerank.tsv');
  if (opts.weights === 'uniform' && existsSync(reference)) {
    const ref = new Map<string, number>();
    for (const [u, s] of await readScores(reference)) {
      if (!crawled) ref.set(u, s);
      else try { ref.set(canonicalUrl(u), (ref.get(canonicalUrl(u)) ?? 0) + s); } catch { /* not crawlable */ }
    }
    console.log(`\nL1 distance to ${reference}: ${l1Distance(new Map(scores), ref).toExponential(3)}`);
  }
}
