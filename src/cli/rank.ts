import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { Command } from 'commander';
import { readGraph, type WebGraph } from '../replay/graphFile.js';
import { rankGraph } from '../jobs/rankGraph.js';
import { weightFunction } from '../actors/metrics/weights.js';
import { ChaosPolicy } from '../runtime/actor/chaosPolicy.js';
import { chaosKinds, cliLogger } from './options.js';
import { graphInput, openJobRun } from './jobRun.js';
import { openInspection } from './inspect.js';
import { withJobOptions } from './jobOptions.js';

/** `shardflow rank`: rank a graph file through the pipeline and write `url<TAB>score` lines. */
export function rankCommand(setExit: (code: number) => void): Command {
  return withJobOptions(
    new Command('rank')
      .description('load a graph through the pipeline (link operations, backlinks, metric messages) and write its scores, highest first')
      .requiredOption('--pages <file>', '(required) pages.txt (one URL per line; .xz accepted)')
      .requiredOption('--links <file>', '(required) links.tsv (source<TAB>target; .xz accepted)')
      .requiredOption('--out <file>', '(required) output: url<TAB>score lines, scores summing to 1')
      .option('--update', 'on a --data-dir that holds another graph: apply this one as a change of it (pages it does not list are kept)'),
    { default: 'uniform', help: 'link weights: uniform (PageRank, damping 0.85, dangling mass spread uniformly), reasonable, or a weight table .json' },
  )
    .action(async (opts, command: Command) => {
      const log = cliLogger(opts.logLevel);
      let graph: WebGraph | undefined = await readGraph(opts.pages, opts.links);
      // Open --out first: a folder that does not exist fails now, not after the ranking.
      const out = createWriteStream(opts.out);
      await once(out, 'open');
      const run = await openJobRun(opts, await graphInput('graph', opts.pages, opts.links), log);
      const broker = run.broker;
      const inspection = await openInspection(opts, command).catch(async (err) => {
        await run.close();
        throw err;
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
        for (const [url, score] of result.scores) {
          if (!out.write(`${url}\t${score}\n`)) await once(out, 'drain');
        }
        out.end();
        await once(out, 'finish');
        console.error(`ranked ${result.pages} pages, ${result.outlinks} links, ${result.backlinks} backlinks in ${result.converge.rounds} rounds, ${result.converge.pushes} pushes, ${result.converge.messages} messages (load ${result.loadSeconds.toFixed(2)} s, converge ${result.convergeSeconds.toFixed(2)} s)`);
        setExit(result.converge.converged ? 0 : 1);
      } finally {
        out.destroy();
        await inspection?.close();
        await run.close();
      }
    });
}
