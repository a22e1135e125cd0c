import { Command } from 'commander';
import { ScoresFile } from './scoresFile.js';
import { readGraph, type WebGraph } from '../replay/graphFile.js';
import { rankGraph } from '../jobs/rankGraph.js';
import { weightFunction } from '../actors/metrics/weights.js';
import type { ConvergeResult } from '../actors/metrics/coordinator.js';
import { ChaosPolicy, InvalidArgumentError } from '../index.js';
import { chaosKinds, cliLogger } from './options.js';
import { graphInput, openJobRun } from './jobRun.js';
import { openInspection } from './inspect.js';
import { withJobOptions, weightsLabel } from './jobOptions.js';
import { clusterName, clusterUrl } from './worker.js';
import { rankOnClusterCli, WEB_INDEX_CLUSTER } from './rankCluster.js';

/** `shardflow rank`: rank a graph file through the pipeline and write `url<TAB>score` lines. */
export function rankCommand(setExit: (code: number) => void): Command {
  return withJobOptions(
    new Command('rank')
      .description('load a graph through the pipeline (link operations, backlinks, metric messages) and write its scores, highest first')
      .requiredOption('--pages <file>', '(required) pages.txt (one URL per line; .xz accepted)')
      .requiredOption('--links <file>', '(required) links.tsv (source<TAB>target; .xz accepted)')
      .requiredOption('--out <file>', '(required) output: url<TAB>score lines, scores summing to 1')
      .option('--update', 'on a --data-dir that holds another graph: apply this one as a change of it: a URL its pages file lists or that has links in it gets the outlinks it gives (none if it has no links), a URL named only as a link target keeps its outlinks (a new one is a page without any), URLs it does not name are kept')
      .option('--cluster <url>', 'rank on the workers of a cluster (`shardflow worker --web-index`) coordinated by this Redis, as a client: no local partitions (docs/cluster.md)', clusterUrl)
      .option('--cluster-name <name>', `with --cluster: the cluster's name (default ${WEB_INDEX_CLUSTER})`, clusterName)
      .option('--key-prefix <prefix>', "with --cluster: prefix of the cluster's Redis keys", 'sfc:')
      .option('--job <name>', 'with --cluster: the job name (default: a digest of the graph, so that the same command started again resumes the job)'),
    { default: 'uniform', help: 'link weights: uniform (PageRank, damping 0.85, dangling mass spread uniformly), reasonable, or a weight table .json' },
  )
    .action(async (opts, command: Command) => {
      const log = cliLogger(opts.logLevel);
      if (opts.cluster === undefined) {
        for (const [o, flag] of [['clusterName', '--cluster-name'], ['job', '--job'], ['keyPrefix', '--key-prefix']] as const) if (command.getOptionValueSource(o) === 'cli') throw new InvalidArgumentError(`${flag} goes with --cluster`);
      } else {
        for (const o of ['dataDir', 'update', 'chaos', 'inspectPort', 'weights']) {
          if (command.getOptionValueSource(o) === 'cli') throw new InvalidArgumentError(`--${o.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} does not apply with --cluster: the workers hold the partitions (their data dir, weights and console are theirs)`);
        }
      }
      let graph: WebGraph | undefined = await readGraph(opts.pages, opts.links);
      // Found by a new user: two empty files ranked nothing and exited 0 with an empty --out.
      if (graph.pages.length === 0) throw new InvalidArgumentError(`${opts.pages} and ${opts.links} hold no page: nothing to rank`);
      // Written beside --out and renamed over it once complete (ScoresFile); opened first: a
      // folder that does not exist fails now, not after the ranking.
      const out = await ScoresFile.open(opts.out);
      const discard = (err: unknown): never => {
        out.discard();
        throw err;
      };
      if (opts.cluster !== undefined) {
        const stop = new AbortController();
        const onSignal = (signal: NodeJS.Signals) => stop.abort(Object.assign(new Error(`${signal}: the job stopped (the workers keep its state: run the same command again to resume it)`), { code: 'SF_ERR_INTERRUPTED', signal }));
        process.once('SIGINT', onSignal);
        process.once('SIGTERM', onSignal);
        try {
          const result = await rankOnClusterCli({
            cluster: opts.cluster,
            clusterName: opts.clusterName ?? WEB_INDEX_CLUSTER,
            keyPrefix: opts.keyPrefix,
            // The workers' broker: --broker, or the cluster's Redis (as `serve --cluster`).
            broker: command.getOptionValueSource('broker') === 'cli' ? opts.broker : opts.cluster,
            graph: () => {
              const g = graph!;
              graph = undefined;
              return g;
            },
            log,
            tolerance: opts.tolerance,
            signal: stop.signal,
            say: (line) => process.stderr.write(`shardflow rank: ${line}\n`),
            onRound: (r) => {
              if (r.round % 10 === 0) process.stderr.write(`shardflow rank: metric round ${r.round}: pushed ${r.pushed}, messages ${r.messages}, error bound ${r.bound.toExponential(2)}\n`);
            },
            ...(opts.job !== undefined ? { job: opts.job } : {}),
            ...(command.getOptionValueSource('partitions') === 'cli' ? { partitions: opts.partitions } : {}),
          });
          if (!result.converge.converged) {
            process.stderr.write(notConverged(result.converge, opts.tolerance));
            setExit(1);
            return;
          }
          await out.write(result.scores);
          console.error(`ranked ${result.pages} pages, ${result.outlinks} links, ${result.backlinks} backlinks on cluster ${opts.clusterName ?? WEB_INDEX_CLUSTER} (job ${result.job}${result.loadSkipped ? ', load found applied' : ''}) in ${result.converge.rounds} rounds, ${result.converge.pushes} pushes, ${result.converge.messages} messages (load ${result.loadSeconds.toFixed(2)} s, converge ${result.convergeSeconds.toFixed(2)} s)`);
          setExit(0);
        } finally {
          process.off('SIGINT', onSignal);
          process.off('SIGTERM', onSignal);
          out.discard();
        }
        return;
      }
      const run = await graphInput('graph', opts.pages, opts.links).then((input) => openJobRun(opts, { ...input, weights: weightsLabel(opts.weights) }, log)).catch(discard);
      const broker = run.broker;
      const inspection = await openInspection(opts, command).catch(async (err) => {
        await run.close();
        return discard(err);
      });
      const chaos = opts.chaos > 0 ? ChaosPolicy.create({ rate: opts.chaos, seed: 42, kinds: chaosKinds }) : undefined;
      try {
        const result = await rankGraph({
          // Handed over, so that the job drops the graph once it is loaded.
          graph: () => {
            const g = graph!;
            graph = undefined;
            return g;
          },
          partitions: opts.partitions,
          dataDir: run.dir.path,
          broker,
          ...run.job,
          stall: { onStall: (report) => process.stderr.write(`shardflow: ${report}\n`) },
          weigh: weightFunction(opts.weights),
          tolerance: opts.tolerance,
          log,
          ...(chaos ? { chaos } : {}),
          ...(inspection ? { onStarted: (index) => inspection.attach(index) } : {}),
        });
        if (!result.converge.converged) {
          process.stderr.write(notConverged(result.converge, opts.tolerance));
          setExit(1);
          return;
        }
        await out.write(result.scores);
        run.completed();
        console.error(`ranked ${result.pages} pages, ${result.outlinks} links, ${result.backlinks} backlinks in ${result.converge.rounds} rounds, ${result.converge.pushes} pushes, ${result.converge.messages} messages (load ${result.loadSeconds.toFixed(2)} s, converge ${result.convergeSeconds.toFixed(2)} s)`);
        setExit(0);
      } finally {
        out.discard();
        await inspection?.close();
        await run.close();
      }
    });
}

/**
 * The lines `rank` prints when the metric stopped at its round limit above the tolerance: the
 * scores are not written (an earlier `--out` is left as it was), and the exit code is 1.
 */
function notConverged(c: Pick<ConvergeResult, 'rounds' | 'residual'>, tolerance: number): string {
  return `shardflow rank: the metric did not converge within ${c.rounds} rounds (its limit): the residual left, ${c.residual.toExponential(2)}, keeps the error bound above --tolerance ${tolerance}. ` +
    'The scores are not written; --out is left as it was.\n';
}
