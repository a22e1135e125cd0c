import { createWriteStream, renameSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import { Command } from 'commander';
import { readGraph, type WebGraph } from '../replay/graphFile.js';
import { rankGraph } from '../jobs/rankGraph.js';
import { weightFunction } from '../actors/metrics/weights.js';
import { ChaosPolicy } from '../index.js';
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
      .option('--update', 'on a --data-dir that holds another graph: apply this one as a change of it: every URL it names (as a page or a link target) gets the outlinks it gives (none for a target only), URLs it does not name are kept'),
    { default: 'uniform', help: 'link weights: uniform (PageRank, damping 0.85, dangling mass spread uniformly), reasonable, or a weight table .json' },
  )
    .action(async (opts, command: Command) => {
      const log = cliLogger(opts.logLevel);
      let graph: WebGraph | undefined = await readGraph(opts.pages, opts.links);
      // Write to a file beside --out, renamed over it once complete: a run that is refused,
      // fails or is stopped leaves an earlier --out as it was, never empty or cut short.
      // Opened first: a folder that does not exist fails now, not after the ranking.
      const partial = `${opts.out}.partial-${process.pid}`;
      const out = createWriteStream(partial);
      await once(out, 'open');
      let written = false;
      const discard = (err: unknown): never => {
        out.destroy();
        rmSync(partial, { force: true });
        throw err;
      };
      const run = await graphInput('graph', opts.pages, opts.links).then((input) => openJobRun(opts, input, log)).catch(discard);
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
        for (const [url, score] of result.scores) {
          if (!out.write(`${url}\t${score}\n`)) await once(out, 'drain');
        }
        out.end();
        await once(out, 'finish');
        renameSync(partial, opts.out);
        written = true;
        console.error(`ranked ${result.pages} pages, ${result.outlinks} links, ${result.backlinks} backlinks in ${result.converge.rounds} rounds, ${result.converge.pushes} pushes, ${result.converge.messages} messages (load ${result.loadSeconds.toFixed(2)} s, converge ${result.convergeSeconds.toFixed(2)} s)`);
        setExit(result.converge.converged ? 0 : 1);
      } finally {
        out.destroy();
        if (!written) rmSync(partial, { force: true });
        await inspection?.close();
        await run.close();
      }
    });
}
