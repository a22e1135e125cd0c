import { Command, InvalidArgumentError } from 'commander';
import { clusterBrokerIdentity, clusterStatus, connectBroker, deleteBrokerScope, listClusters, retireCluster, type Broker, type ClusterStatus } from '../index.js';
import { openCheckpointStore } from '../storage/index.js';
import { checkpointUrl, clusterName, clusterUrl } from './worker.js';
import { clusterConsoleCommand } from './clusterConsole.js';

/** Options shared by the commands that read a cluster: `--cluster`, `--name`, `--key-prefix`, `--broker`. */
export interface ClusterReadOptions {
  readonly cluster: string;
  readonly name?: string;
  readonly keyPrefix: string;
  readonly broker?: string;
}

/** Adds the options of {@link ClusterReadOptions} to `command`. */
export function withClusterReadOptions(command: Command, clusterRequired = true): Command {
  const cluster = '--cluster <url>';
  const help = "the Redis that coordinates the cluster, redis://host:port";
  return (clusterRequired ? command.requiredOption(cluster, `(required) ${help}`, clusterUrl) : command.option(cluster, help, clusterUrl))
    .option('--name <cluster>', 'the cluster (default: the only one recorded in that Redis)', clusterName)
    .option('--key-prefix <prefix>', "prefix of the cluster's Redis keys", 'sfc:')
    .option('--broker <spec>', "read backlogs through this broker (default: the broker the workers report; memory has none)");
}

/**
 * Reads the status of the cluster `--name` (or the only cluster in that Redis), with each
 * partition's backlog read through `--broker` or, without it, the broker the live workers
 * report in their membership records (none when they run on the memory broker).
 * @throws commander's InvalidArgumentError when no cluster or several are recorded and none is named
 */
export async function readCluster(opts: ClusterReadOptions): Promise<ClusterStatus> {
  let name = opts.name;
  if (name === undefined) {
    const names = await listClusters(opts.cluster, opts.keyPrefix);
    if (names.length !== 1) {
      throw new InvalidArgumentError(names.length === 0 ? `no cluster recorded in ${opts.cluster} under ${opts.keyPrefix}` : `${names.length} clusters in ${opts.cluster}: name one with --name (${names.join(', ')})`);
    }
    name = names[0]!;
  }
  const first = await clusterStatus({ cluster: opts.cluster, clusterName: name, keyPrefix: opts.keyPrefix });
  const identity = opts.broker !== undefined ? clusterBrokerIdentity(opts.broker, name) : first.workers.map((w) => w.broker).find((b) => b && b.kind !== 'memory');
  if (!identity || identity.kind === 'memory') return first;
  const broker: Broker = await connectBroker(identity);
  try {
    return await clusterStatus({ cluster: opts.cluster, clusterName: name, keyPrefix: opts.keyPrefix, broker });
  } finally {
    await broker.close();
  }
}

/** Left-aligned columns: one row per line, each cell padded to its column's widest. */
export function table(rows: ReadonlyArray<readonly string[]>): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n');
}

/**
 * The text of `shardflow cluster status`: a summary line, the workers (id, host, pid, leases,
 * running, opening, failed, console URL) and the partitions (owner, assignee, lease epoch, ms
 * left on the lease, state, backlog, and the standbys when a partition has any; `-` where unknown).
 */
export function renderClusterStatus(s: ClusterStatus): string {
  const states = new Map<string, number>();
  for (const p of s.partitions) states.set(p.state, (states.get(p.state) ?? 0) + 1);
  const backlogs = s.partitions.map((p) => p.backlog).filter((b): b is number => b !== undefined);
  const standbys = s.partitions.some((p) => p.standbys.length > 0);
  const lines = [
    `cluster ${s.cluster}: ${s.workers.length} workers; leader ${s.leader ? `${s.leader.worker} (epoch ${s.leader.epoch})` : 'none'}; assignment round ${s.assignmentRound}; ` +
      `${s.partitions.length} partitions: ${[...states].map(([k, n]) => `${n} ${k}`).join(', ') || 'none'}` +
      (backlogs.length > 0 ? `; backlog ${backlogs.reduce((a, b) => a + b, 0)}` : ''),
    '',
    table([
      ['WORKER', 'HOST', 'PID', 'LEASES', 'RUNNING', 'OPENING', 'FAILED', 'SILENT-MS', 'CONSOLE'],
      ...s.workers.map((w) => [w.id, w.host, String(w.pid), String(w.leases), String(w.running.length), String(w.opening.length), String(Object.keys(w.failed).length), w.silentMs === undefined ? '-' : String(w.silentMs), w.inspectUrl ?? '-']),
    ]),
    '',
    table([
      ['PARTITION', 'OWNER', 'ASSIGNED', 'EPOCH', 'LEASE-MS', 'STATE', 'BACKLOG', ...(standbys ? ['STANDBYS'] : [])],
      ...s.partitions.map((p) => [
        p.unit, p.owner ?? '-', p.assignedTo ?? '-', String(p.epoch), p.leaseMsLeft === undefined ? '-' : String(p.leaseMsLeft), p.state + (p.reason ? ' (see below)' : ''), p.backlog === undefined ? '-' : String(p.backlog),
        ...(standbys ? [p.standbys.join(',') || '-'] : []),
      ]),
    ]),
  ];
  // Reasons after the table, one a line: a long one widened every row (found by a new user).
  const reasons = s.partitions.filter((p) => p.reason);
  if (reasons.length > 0) lines.push('', ...reasons.map((p) => `${p.unit} ${p.state}: ${p.reason}`));
  return lines.join('\n');
}

/** `shardflow cluster status` (workers, partitions, owners, lease epochs, states and backlogs of a cluster) and `shardflow cluster retire`. */
export function clusterCommand(setExit: (code: number) => void): Command {
  const status = withClusterReadOptions(
    new Command('status').description('print the workers, partitions, owners, lease epochs, states and backlogs of a cluster'),
  )
    .option('--json', 'print the status as one JSON object', false)
    .action(async (opts: ClusterReadOptions & { json: boolean }) => {
      const s = await readCluster(opts);
      if (s.stages === undefined) {
        process.stderr.write(`shardflow: no cluster ${s.cluster} in ${opts.cluster} (no worker ever joined it)\n`);
        setExit(1);
        return;
      }
      process.stdout.write(opts.json ? `${JSON.stringify(s)}\n` : `${renderClusterStatus(s)}\n`);
      setExit(0);
    });
  const retire = new Command('retire')
    .description("retire a cluster no worker runs: remove its Redis keys and, with --checkpoints, its partitions' checkpoints (workers started again under the name then begin afresh, given new data dirs)")
    .requiredOption('--cluster <url>', "(required) the Redis that coordinates the cluster, redis://host:port", clusterUrl)
    .requiredOption('--name <cluster>', '(required) the cluster to retire', clusterName)
    .option('--key-prefix <prefix>', "prefix of the cluster's Redis keys", 'sfc:')
    .option('--checkpoints <url>', "the cluster's checkpoint store (file:///DIR or s3://BUCKET/PREFIX, with the AWS_* environment; refused when it is not the one the cluster ran with): its checkpoints are removed too", checkpointUrl)
    .option('--broker <spec>', "the workers' broker (redis://HOST:PORT or pulsar://HOST:PORT): the cluster's broker scope (its topics and what waits in them) is deleted too, so that a fresh start applies none of the old input")
    .action(async (opts: { cluster: string; name: string; keyPrefix: string; checkpoints?: string; broker?: string }) => {
      const checkpoints = opts.checkpoints !== undefined ? openCheckpointStore(opts.checkpoints) : undefined;
      try {
        const r = await retireCluster({ cluster: opts.cluster, clusterName: opts.name, keyPrefix: opts.keyPrefix, ...(checkpoints ? { checkpoints } : {}) });
        const scope = opts.broker !== undefined ? await deleteBrokerScope(clusterBrokerIdentity(opts.broker, opts.name)) : undefined;
        process.stdout.write(
          `retired cluster ${opts.name}: ${r.keys} Redis keys deleted` +
            (checkpoints ? `, ${r.checkpoints} checkpoints removed from ${opts.checkpoints}` : ' (its checkpoints, if any, stay: give --checkpoints to remove them)') +
            (scope ? `, its broker scope deleted (${scope.topics} topics)` : ' (its broker scope stays, with any input not yet applied: give --broker to delete it)') +
            "; the workers' data dirs stay\n",
        );
        setExit(0);
      } finally {
        await checkpoints?.close();
      }
    });
  return new Command('cluster').description('read or retire a cluster of workers (see `shardflow worker`)').addCommand(status).addCommand(retire).addCommand(clusterConsoleCommand());
}
