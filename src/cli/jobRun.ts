import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { resolve } from 'node:path';
import type { Logger } from 'pino';
import { deleteBrokerScope, type Broker } from '../runtime/brokers/index.js';
import { DataDirError, JobInterruptedError } from '../index.js';
import { hostPartitioner } from '../actors/partition/hostPartitioner.js';
import { DataDir, type BrokerIdentity, type JobInput } from '../topology/dataDir.js';
import type { RepairReport } from '../topology/repair.js';
import { lostSubscriptions, webIndexSubscriptions, type DrainReport } from '../topology/resume.js';
import type { JobStopReport } from '../jobs/watchdog.js';
import { freshBrokerIdentity, openBroker, runDataDir } from './options.js';

/** The options of a job command that `openJobRun` reads. */
export interface JobRunOptions {
  readonly dataDir?: string;
  readonly partitions: number;
  /** `--broker`. */
  readonly broker: string;
  /** `--update`: accept another input than the one the data dir holds (applied as a change of it). */
  readonly update?: boolean;
}

/** What a job command runs with: its data dir (checked), broker, stop signal and the options to hand its job. */
export interface JobRun {
  readonly dir: DataDir;
  readonly broker: Broker;
  readonly identity: BrokerIdentity;
  /** Aborted by the first SIGINT or SIGTERM (reason: JobInterruptedError). */
  readonly signal: AbortSignal;
  /** Spread into `rankGraph` / `crawlGraph`: repair, signal, and the record updates. */
  readonly job: {
    readonly repair: boolean;
    readonly resume: boolean;
    readonly onResumed: (report: DrainReport) => void;
    readonly signal: AbortSignal;
    readonly onRepaired: (report: RepairReport) => void;
    readonly onStopped: (report: JobStopReport) => void;
  };
  /** Records that the run completed with its input (`DataDir.markInputApplied`): call once its result is out. */
  completed(): void;
  /** Closes the broker, removes a temp data dir and the signal handlers. */
  close(): Promise<void>;
}

/**
 * Prepares a job command's run on its data dir (a temp one without `--data-dir`):
 * 1. opens the data dir and checks its shape (DataDir.open) and input: another kind of input
 *    (a graph file, a replayed crawl of one as `demo` runs, a live crawl) always, another graph
 *    than the one it holds unless `--update`, other link weights always (the input's
 *    `weights`, when both records have them);
 * 2. prints its first line on stderr (new, or what it holds and how the last run ended);
 * 3. recovers a data dir whose last run did not stop quiet: on the same durable broker
 *    scope, when it still holds what that run left, the job resumes (drains it first);
 *    otherwise (the in-memory broker, another broker, lost broker data, a repair cut short)
 *    it repairs from the stores under a fresh scope, and removes the old one;
 * 4. records the run as `running` (and `quiet` at a stop with nothing in flight);
 * 5. turns the first SIGINT or SIGTERM into a clean stop (the job's `signal`), and a second
 *    one into an immediate exit (130).
 * @throws DataDirError (see DataDir.open; another input without `--update`; other weights), the broker's
 *   connection errors
 */
export async function openJobRun(options: JobRunOptions, input: JobInput, log: Logger): Promise<JobRun> {
  const data = runDataDir(options.dataDir);
  let dir: DataDir;
  try {
    dir = await DataDir.open(data.dir, { partitions: options.partitions, partitioner: hostPartitioner(options.partitions).describe() });
  } catch (err) {
    data.remove();
    throw err;
  }
  /** Gives the data dir up before the run starts: its lock released, a temp one removed (a --data-dir is kept). */
  const abandon = () => {
    dir.release();
    data.remove();
  };
  const held = dir.record?.input;
  // (A crawl's input has a digest when it replays a graph file, as `demo` does, none when live.)
  if (held && (held.kind !== input.kind || (held.kind === 'crawl' && (held.digest === undefined) !== (input.digest === undefined)))) {
    // A crawl's pages, links and scores and a graph file's are not one graph: ranking a file
    // on a crawled data dir would replace crawled pages' outlinks by the file's, and crawling
    // into a graph's would mix both. (`--update` applies another version of the same kind.)
    abandon();
    const what = (i: JobInput) => (i.kind === 'graph' ? 'a graph file' : i.digest !== undefined ? 'a replayed crawl of a graph file' : 'a live crawl');
    throw new DataDirError(
      `data dir ${data.dir} holds ${what(held)} (${held.kind} ${held.description}); this run gives ${what(input)} (${input.description}). ` +
        'A data dir holds one kind of input: give a fresh --data-dir.',
    );
  }
  const pending = dir.inputPending;
  if (pending && pending.digest !== input.digest) {
    // Found by a new user: a load killed part way, then --update with other files, ranked
    // what the two gave (2,266 of 4,150 pages missing) and exited 0.
    abandon();
    throw new DataDirError(
      `data dir ${data.dir} holds ${pending.kind} ${pending.description} applied in part: the run with it was stopped or killed before it completed. ` +
        'Run the same command with those files again to complete it, then this one; or give a fresh --data-dir',
    );
  }
  if (held?.digest && input.digest && held.digest !== input.digest && !options.update) {
    abandon();
    const changed = held.description === input.description ? ' (the same files, changed since: their content differs)' : '';
    throw new DataDirError(
      `data dir ${data.dir} holds ${held.kind} ${held.description}; this run gives ${input.description}${changed}: ` +
        'give a fresh --data-dir, or pass --update to apply it as a change of what the data dir holds (the pages it lists and the sources of its links get the outlinks it gives them, others are kept)',
    );
  }
  if (held?.weights !== undefined && input.weights !== undefined && held.weights !== input.weights) {
    abandon();
    throw new DataDirError(
      `data dir ${data.dir} holds scores computed with --weights ${held.weights}; this run gives ${input.weights}: ` +
        'its ranks and residuals hold for the weights they were computed with, so going on would write the old weighting\'s scores. ' +
        `Run with the same --weights, or give a fresh --data-dir to rank with ${input.weights}`,
    );
  }
  // After the refusals above: a refused run recovers nothing (found by a new user: it said
  // "recovering what was in flight", then refused).
  process.stderr.write(`${dir.describe()}\n`);
  let fresh: BrokerIdentity;
  try {
    fresh = freshBrokerIdentity(options.broker);
  } catch (err) {
    abandon();
    throw err;
  }
  let identity = dir.brokerIdentity(fresh);
  let repair = dir.needsRecovery;
  let resume = false;
  let broker: Broker | undefined;
  const resumable = dir.resumableScope(fresh);
  if (resumable) {
    // A durable broker keeps what the killed run left in flight: go on with it, unless the
    // broker lost it (a restart without persistence, deleted topics): then repair.
    broker = await openBroker(options.broker, resumable).catch((err: unknown) => {
      abandon();
      throw err;
    });
    const lost = await lostSubscriptions(broker, webIndexSubscriptions(options.partitions, input.kind === 'crawl'));
    if (lost.length === 0) {
      identity = resumable;
      repair = false;
      resume = true;
    } else {
      process.stderr.write(`the broker does not hold what the last run left (${lost.length} subscriptions missing, e.g. ${lost[0]}: its data was lost, or the run was killed before it subscribed): repairing from the stores\n`);
      await broker.close();
      broker = undefined;
    }
  }
  broker ??= await openBroker(options.broker, identity).catch((err: unknown) => {
    abandon();
    throw err;
  });
  const previous = dir.record?.broker;
  dir.markRunning(identity, input, repair);
  if (repair) log.warn({ dataDir: data.dir, broker: identity }, 'the last run did not stop quiet: repairing the data dir before the job');
  if (resume) log.warn({ dataDir: data.dir, broker: identity }, 'the last run did not stop quiet: resuming on its broker scope');
  if (previous?.scope && previous.scope !== identity.scope && previous.kind === identity.kind && previous.url === identity.url) {
    // The previous run's scope holds only messages the repair derives again: remove it.
    await deleteBrokerScope(previous).then(
      (removed) => log.info({ scope: previous.scope, ...removed }, 'removed the previous run\'s broker scope'),
      (err: unknown) => log.warn({ scope: previous.scope, err: (err as Error).message }, 'could not remove the previous run\'s broker scope (shardflow clean removes it later)'),
    );
  }

  const controller = new AbortController();
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    if (++signals > 1) {
      process.stderr.write(`shardflow: ${signal} again: exiting without a clean stop (the next run repairs the data dir)\n`);
      process.exit(130);
    }
    process.stderr.write(`shardflow: ${signal}: stopping cleanly (stop consuming, commit, close the stores); ${signal} again exits at once\n`);
    // A temp data dir is removed at the end: nothing goes on with it (found by a new user: the
    // message named a folder already gone).
    const next = data.kept ? `the same command on --data-dir ${data.dir} goes on with it` : 'its temporary data dir is removed; give --data-dir DIR to keep a run that can go on';
    controller.abort(new JobInterruptedError(signal, `stopped by ${signal}; ${next}`));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    dir,
    broker,
    identity,
    signal: controller.signal,
    job: {
      repair,
      resume,
      onResumed: (report) => {
        process.stderr.write(`resumed: ${report.messages} messages the last run left on the broker applied in ${report.seconds.toFixed(2)} s\n`);
      },
      signal: controller.signal,
      onRepaired: (report) => {
        dir.markRepaired();
        process.stderr.write(`repaired: ${report.linkOps} links sent again to rebuild backlinks, residuals recomputed in round ${report.round} (${report.messages} messages) in ${report.seconds.toFixed(2)} s\n`);
      },
      onStopped: (report) => dir.markStopped(report.quiet, report.brokerDataLost),
    },
    completed: () => dir.markInputApplied(),
    async close() {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      await broker.close();
      if (!data.kept && identity.scope) {
        // A temp data dir goes with the run, and so does its broker scope.
        await deleteBrokerScope(identity).catch((err: unknown) => log.warn({ scope: identity.scope, err: (err as Error).message }, 'could not remove the run\'s broker scope (shardflow clean --broker … --orphans lists it)'));
      }
      dir.release();
      data.remove();
    },
  };
}

/**
 * The input of a job on a graph file: its two files' paths and a sha256 over their bytes
 * (so a data dir tells the same graph, under any path, from another one).
 * @throws the files' read errors (ENOENT, ...)
 */
export async function graphInput(kind: JobInput['kind'], pagesFile: string, linksFile: string): Promise<JobInput> {
  const hash = createHash('sha256');
  for (const file of [pagesFile, linksFile]) {
    for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
    hash.update('\u0000');
  }
  return { kind, description: `${resolve(pagesFile)} + ${resolve(linksFile)}`, digest: hash.digest('hex') };
}
