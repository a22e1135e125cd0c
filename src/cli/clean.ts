import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { brokerKind, BrokerScopeInUseError, deleteBrokerScope, describeBrokerScope, listBrokerScopes, type BrokerIdentity, type BrokerScopeRemoval } from '../runtime/brokers/index.js';
import { DataDirError, InvalidArgumentError, lockFileHolder, readTopologyRecord, TOPOLOGY_LOCK_FILE } from '../index.js';
import { readRecord } from '../topology/dataDir.js';
import { dataDirLockHolder } from '../topology/dataDirLock.js';

/** The broker a data dir records: a web-index job's (`shardflow.json`) or a framework topology's (`topology.json`). */
function recordOf(dir: string): { readonly broker: BrokerIdentity } | undefined {
  return readRecord(dir) ?? readTopologyRecord(dir);
}

/** The pid of the live process that holds data dir `dir` (a job's or a topology's lock), if any. */
function holderOf(dir: string): number | undefined {
  return dataDirLockHolder(dir) ?? lockFileHolder(join(dir, TOPOLOGY_LOCK_FILE));
}

/** Options of `runClean` (the `shardflow clean` flags). */
export interface CleanOptions {
  /** Data dirs: whose scopes to remove, or with `orphans` whose scopes to keep. */
  readonly dataDirs: readonly string[];
  /** `redis://host:port[/db]` or `pulsar://host:port`; with `dataDirs`, must equal the recorded url. */
  readonly broker?: string;
  /** A scope to remove by name (needs `broker`). */
  readonly scope?: string;
  /** List the run scopes on `broker` that no data dir of `dataDirs` refers to. */
  readonly orphans?: boolean;
  /** With `orphans`: delete those no client is connected to. */
  readonly yes?: boolean;
  /** With `orphans`: the scope family to look at (default `sf:` / `shardflow-`). */
  readonly family?: string;
  /** With `dataDirs`: remove the data dirs too. */
  readonly removeData?: boolean;
  /** Remove a scope even while clients are connected to it. */
  readonly force?: boolean;
}

/** Connected clients named in a refusal, at most. */
const SHOWN_CLIENTS = 3;

/**
 * `shardflow clean`: removes what runs left on a broker (docs/brokers.md, "Scopes and
 * clean-up"). Three modes:
 * - `dataDirs` (one or more): reads each data dir's record (`shardflow.json`), deletes the
 *   broker scope it names, with `removeData` the data dir too. All data dirs are checked
 *   before anything is removed.
 * - `broker` + `scope`: deletes that scope.
 * - `broker` + `orphans`: lists the run scopes (`sf:<run>:`, `shardflow-<run>`) no data dir
 *   of `dataDirs` refers to; with `yes` deletes those no client is connected to.
 * A scope with connected clients (a running job) is not removed unless `force`.
 * Writes one line per scope (what was or would be removed) through `write`.
 * @throws InvalidArgumentError for a wrong combination of options, a data dir whose record
 *   names another broker than `broker`, an in-memory `broker`
 * @throws DataDirError for a data dir that does not exist or has no record (nothing removed)
 * @throws BrokerScopeInUseError for a scope with connected clients (nothing removed of it)
 * @throws BrokerDisconnectedError when the broker does not answer
 */
export async function runClean(o: CleanOptions, write: (line: string) => void): Promise<void> {
  if (o.orphans && o.scope !== undefined) throw new InvalidArgumentError('give either --scope or --orphans');
  if ((o.scope !== undefined || o.orphans) && o.broker === undefined) throw new InvalidArgumentError(`--${o.orphans ? 'orphans' : 'scope'} needs --broker (redis://host:port or pulsar://host:port)`);
  if (o.yes && !o.orphans) throw new InvalidArgumentError('--yes goes with --orphans');
  if (o.family !== undefined && !o.orphans) throw new InvalidArgumentError('--family goes with --orphans');
  if (o.removeData && (o.orphans || o.scope !== undefined || o.dataDirs.length === 0)) throw new InvalidArgumentError('--remove-data goes with --data-dir alone');
  if (o.orphans) return cleanOrphans(o, o.broker!, write);
  if (o.scope !== undefined) {
    if (o.dataDirs.length > 0) throw new InvalidArgumentError('give either --data-dir or --scope');
    const url = brokerUrl(o.broker!);
    const identity: BrokerIdentity = { kind: brokerKind(url), url, scope: o.scope };
    write(`scope ${o.scope} on ${url}: removed ${await removeScope(identity, o.force ?? false)}`);
    return;
  }
  if (o.dataDirs.length === 0) throw new InvalidArgumentError('give --data-dir DIR, --broker SPEC --scope SCOPE, or --broker SPEC --orphans');
  const plan = o.dataDirs.map((dir) => ({ dir, broker: recordedBroker(dir, o.broker) }));
  for (const { dir, broker } of plan) {
    if (broker.kind === 'memory') {
      write(`data dir ${dir}: ran on the in-memory broker, nothing to remove from a broker`);
    } else {
      write(`data dir ${dir}: scope ${broker.scope} on ${broker.url}: removed ${await removeScope(broker, o.force ?? false)}`);
    }
    if (o.removeData) {
      rmSync(dir, { recursive: true, force: true });
      write(`removed data dir ${dir}`);
    }
  }
}

/**
 * The broker identity recorded in data dir `dir`, checked against `--broker`.
 * @throws DataDirError when `dir` or its record is missing, or a live job holds it (its
 *   lock file, `dataDirLockHolder`); InvalidArgumentError when the
 *   record names another broker than `given`
 */
function recordedBroker(dir: string, given: string | undefined): BrokerIdentity {
  if (!existsSync(dir)) throw new DataDirError(`no data dir at ${dir}`);
  const holder = holderOf(dir);
  if (holder !== undefined) {
    throw new DataDirError(`data dir ${dir} is in use by process ${holder} (a shardflow job runs on it): nothing was removed. Stop that job first.`);
  }
  const record = recordOf(dir);
  if (!record) {
    throw new DataDirError(
      `${dir} has no record file (shardflow.json of a job, topology.json of a topology): it is not a data dir, or was written before data dirs recorded their broker scope. Nothing was removed; remove a known scope with --broker SPEC --scope SCOPE.`,
    );
  }
  const b = record.broker;
  if (given !== undefined) {
    const url = given === 'memory' ? 'memory' : brokerUrl(given);
    const recorded = b.kind === 'memory' ? 'memory' : b.url;
    if (url !== recorded) {
      throw new InvalidArgumentError(
        `data dir ${dir} ran on ${b.kind === 'memory' ? 'the in-memory broker' : recorded}${b.scope ? ` (scope ${b.scope})` : ''}, not on --broker ${given}: nothing was removed. Run without --broker to clean it where its record says.`,
      );
    }
  }
  return b;
}

/** Lists the orphan scopes on `spec` (and with `yes` deletes those not in use). */
async function cleanOrphans(o: CleanOptions, spec: string, write: (line: string) => void): Promise<void> {
  const url = brokerUrl(spec);
  const kind = brokerKind(url);
  const kept = new Set<string>();
  for (const dir of o.dataDirs) {
    if (!existsSync(dir)) throw new DataDirError(`no data dir at ${dir}`);
    const record = recordOf(dir);
    if (!record) throw new DataDirError(`${dir} has no record file (shardflow.json or topology.json): it is not a data dir, so it cannot say which scope to keep`);
    if (record.broker.scope) kept.add(record.broker.scope);
  }
  const scopes = await listBrokerScopes(url, o.family === undefined ? {} : { family: o.family });
  const orphans = scopes.filter((s) => !kept.has(s));
  write(`${scopes.length} run scopes on ${url}, ${scopes.length - orphans.length} kept by the given data dirs, ${orphans.length} orphans`);
  let removed = 0;
  for (const scope of orphans) {
    const identity: BrokerIdentity = { kind, url, scope };
    const contents = await describeBrokerScope(identity);
    if (contents.live.length > 0) {
      write(`in use ${scope}: ${amounts(contents)}; ${clients(contents.live)}: kept`);
    } else if (o.yes) {
      write(`removed ${scope}: ${amounts(await deleteBrokerScope(identity))}`);
      removed++;
    } else {
      write(`orphan ${scope}: ${amounts(contents)}`);
    }
  }
  if (!o.yes && orphans.length > 0) {
    write('listed only: run again with --yes to remove the orphans not in use (a data dir not given with --data-dir loses its scope)');
  } else if (o.yes) {
    write(`removed ${removed} scopes`);
  }
}

/** Deletes `identity`'s scope unless clients are connected (and not `force`). @returns what was removed, as text */
async function removeScope(identity: BrokerIdentity, force: boolean): Promise<string> {
  if (!force) {
    const contents = await describeBrokerScope(identity);
    if (contents.live.length > 0) {
      throw new BrokerScopeInUseError(
        `scope ${identity.scope} on ${identity.url} is in use, ${clients(contents.live)}: a job runs on it. Nothing was removed; stop the job first, or give --force (a killed job's Redis consumers count for 5 s).`,
      );
    }
  }
  return amounts(await deleteBrokerScope(identity));
}

/** `12 keys (4 topics, 3 dead letters)`, or on Pulsar `4 topics (3 dead letters)`. */
function amounts(r: BrokerScopeRemoval): string {
  const dead = `${r.deadLetters} dead letter${r.deadLetters === 1 ? '' : 's'}`;
  if (r.keys > 0) return `${r.keys} keys (${r.topics} topics, ${dead})`;
  return `${r.topics} topics (${dead})`;
}

/** `2 clients connected (a, b, ...)`. */
function clients(live: readonly string[]): string {
  const shown = live.slice(0, SHOWN_CLIENTS).join('; ');
  return `${live.length} client${live.length === 1 ? '' : 's'} connected (${shown}${live.length > SHOWN_CLIENTS ? '; ...' : ''})`;
}

/**
 * A `--broker` address without a trailing slash.
 * @throws InvalidArgumentError for `memory` (nothing outlives a run there) or another scheme
 */
function brokerUrl(spec: string): string {
  if (spec === 'memory') throw new InvalidArgumentError('the in-memory broker keeps nothing after a run: nothing to clean');
  brokerKind(spec);
  return spec.replace(/\/+$/, '');
}

/** Collects a repeatable option's values. */
function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/** The `clean` command (see `runClean`). */
export function cleanCommand(setExit: (code: number) => void): Command {
  return new Command('clean')
    .description('remove what runs left on a broker: the scope (Redis key prefix sf:<run>:, Pulsar tenant shardflow-<run>) of a data dir, a scope by name, or the scopes no data dir refers to')
    .option('--data-dir <dir>', "remove the broker scope this data dir's record names (repeatable); with --orphans: keep its scope", collect, [])
    .option('--broker <spec>', 'redis://host:port or pulsar://host:port; with --data-dir it must be the broker its record names')
    .option('--scope <scope>', 'with --broker: remove this scope (Redis key prefix or Pulsar tenant)')
    .option('--orphans', 'with --broker: list the run scopes that no --data-dir refers to')
    .option('--yes', 'with --orphans: remove the listed orphans that no client is connected to')
    .option('--family <prefix>', 'with --orphans: look at scopes <prefix><run>: (Redis) or <prefix><run> (Pulsar) instead of sf: / shardflow-')
    .option('--remove-data', 'with --data-dir: remove the data dir too, after its scope')
    .option('--force', 'remove a scope even while clients are connected to it (a running job loses its messages)')
    .action(async (opts: { dataDir: string[]; broker?: string; scope?: string; orphans?: boolean; yes?: boolean; family?: string; removeData?: boolean; force?: boolean }) => {
      await runClean(
        {
          dataDirs: opts.dataDir,
          ...(opts.broker !== undefined ? { broker: opts.broker } : {}),
          ...(opts.scope !== undefined ? { scope: opts.scope } : {}),
          ...(opts.family !== undefined ? { family: opts.family } : {}),
          orphans: opts.orphans ?? false,
          yes: opts.yes ?? false,
          removeData: opts.removeData ?? false,
          force: opts.force ?? false,
        },
        (line) => process.stdout.write(`${line}\n`),
      );
      setExit(0);
    });
}
