import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { demoCommand } from './demo.js';
import { rankCommand } from './rank.js';
import { crawlCommand } from './crawl.js';
import { queryCommand, serveCommand } from './query.js';
import { treeCommand } from './tree.js';
import { cleanCommand } from './clean.js';
import { workerCommand } from './worker.js';
import { clusterCommand } from './cluster.js';

/**
 * The `shardflow` command line: `demo` (the main job), `rank` (rank a graph file), `crawl`
 * (crawl real sites), `serve` (the query API over a data folder), `query` (ask it), `tree` (the
 * live supervision tree of a job started with `--inspect-port`, or of every worker of a
 * cluster), `clean` (remove a run's broker scope), `worker` (run a framework topology's
 * partitions as one worker of a cluster), `cluster status` (a cluster's workers and partitions).
 * @returns the process exit code
 */
export async function main(argv: readonly string[]): Promise<number> {
  let code = 0;
  const program = new Command()
    .name('shardflow')
    .description('Partitioned, continuously updated web index: actors, RocksDB, a broker and link metrics')
    .version(packageVersion(), '-V, --version')
    .showHelpAfterError();
  program.addCommand(demoCommand((c) => (code = c)));
  program.addCommand(rankCommand((c) => (code = c)));
  program.addCommand(crawlCommand((c) => (code = c)));
  program.addCommand(serveCommand((c) => (code = c)));
  program.addCommand(queryCommand((c) => (code = c)));
  program.addCommand(treeCommand((c) => (code = c)));
  program.addCommand(cleanCommand((c) => (code = c)));
  program.addCommand(workerCommand((c) => (code = c)));
  program.addCommand(clusterCommand((c) => (code = c)));
  // Commander prints a usage error (an invalid option value, a missing argument, an unknown
  // command or option) and would exit 1, the code of a failed command: thrown here instead,
  // it ends with 2, bad input, as `reportError` says; help and version end with 0.
  const printed = new WeakSet<CommanderError>();
  const override = (c: Command): void => {
    c.exitOverride((err) => {
      printed.add(err);
      throw err;
    });
    for (const sub of c.commands) override(sub);
  };
  override(program);
  try {
    await program.parseAsync([...argv]);
  } catch (err) {
    // Usage errors end with 2; an error a command raised through `command.error()` with an exit
    // code of its own keeps it (a taken --inspect-port: 1, found by a new user).
    if (err instanceof CommanderError && printed.has(err)) return err.exitCode === 0 ? 0 : err.code.startsWith('shardflow.') ? err.exitCode : 2;
    return reportError(err);
  }
  return code;
}

/**
 * Prints an error that ended a command as one line on stderr (`shardflow: ...`) and returns
 * the exit code: 2 for bad input (a file that cannot be read or written, a malformed graph
 * file, an invalid option value), 1 otherwise. The stack is printed too for errors that are
 * not shardflow's typed errors nor bad input (a bug), or always with SHARDFLOW_DEBUG=1.
 */
export function reportError(err: unknown): number {
  const e = err instanceof Error ? err : new Error(String(err));
  const code = (e as { code?: unknown }).code;
  const c = typeof code === 'string' ? code : '';
  // Bad input: a file that cannot be read or written (errno codes), an option value, a
  // malformed graph file or URL.
  const input = /^E[A-Z]+$/.test(c) || c.startsWith('commander.') || c === 'SF_ERR_INVALID_ARGUMENT' || c === 'SF_ERR_INVALID_URL' || e instanceof RangeError;
  // shardflow's typed errors say what happened; anything else is a bug: show where.
  const known = input || c.startsWith('SF_ERR_');
  process.stderr.write(`shardflow: ${e.message}\n`);
  if (c === 'SF_ERR_INTERRUPTED') return (e as { signal?: string }).signal === 'SIGTERM' ? 143 : 130;
  if (!known || process.env.SHARDFLOW_DEBUG === '1') process.stderr.write(`${e.stack ?? ''}\n`);
  return input ? 2 : 1;
}

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}
