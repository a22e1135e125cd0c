import { Command } from 'commander';
import { demoCommand } from './demo.js';
import { rankCommand } from './rank.js';
import { crawlCommand } from './crawl.js';
import { queryCommand, serveCommand } from './query.js';
import { treeCommand } from './tree.js';

/**
 * The `shardflow` command line: `demo` (the main job), `rank` (rank a graph file), `crawl`
 * (crawl real sites), `serve` (the query API over a data folder), `query` (ask it), `tree` (the
 * live supervision tree of a job started with `--inspect-port`).
 * @returns the process exit code
 */
export async function main(argv: readonly string[]): Promise<number> {
  let code = 0;
  const program = new Command()
    .name('shardflow')
    .description('Partitioned, continuously updated web index: actors, RocksDB, a broker and link metrics')
    .showHelpAfterError();
  program.addCommand(demoCommand((c) => (code = c)));
  program.addCommand(rankCommand((c) => (code = c)));
  program.addCommand(crawlCommand((c) => (code = c)));
  program.addCommand(serveCommand((c) => (code = c)));
  program.addCommand(queryCommand((c) => (code = c)));
  program.addCommand(treeCommand((c) => (code = c)));
  await program.parseAsync([...argv]);
  return code;
}
