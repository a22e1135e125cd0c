import type { Redis } from 'ioredis';
import { runClusterScript } from './scripts.js';
import { InvalidArgumentError } from '../errors.js';
import type { BrokerIdentity } from '../runtime/brokers/identity.js';
import type { ClusterKeys } from './keys.js';
import type { ClusterStage } from './units.js';

/** What a live worker says of itself in its membership key, renewed at every heartbeat. */
export interface MemberReport {
  /** Unique per worker process: `<name>.<8 hex digits>`. */
  readonly id: string;
  /** The name given to `startWorker` (default: host name and pid). */
  readonly name: string;
  readonly host: string;
  readonly pid: number;
  /** Most partitions the leader may assign it (`Infinity` is written as null). */
  readonly maxPartitions: number | null;
  /** ms since the epoch, wall clock, at join. */
  readonly startedAt: number;
  /** Units (`<stage>/<partition>`) running in the worker now. */
  readonly running: readonly string[];
  /** Units the worker holds the lease of and is still opening (waiting for the store's previous owner to close it). */
  readonly opening: readonly string[];
  /**
   * Of `opening`, the units whose store another process still holds, with the store's refusal
   * (the `waiting` event's reason: on one machine, a stopped or hung previous owner). Absent
   * in reports of older workers.
   */
  readonly waiting?: Readonly<Record<string, string>>;
  /**
   * Of `running`, the units whose checkpoint puts fail (the checkpoint store does not take
   * them): how long, and the last error (`for 12 s: S3 PUT ...: no answer`). Their acks and
   * outputs wait for a checkpoint meanwhile. Absent in reports of older workers.
   */
  readonly checkpointsFailing?: Readonly<Record<string, string>>;
  /** Units the worker refused to run, with the reason (a store of another shape, a corrupt store). */
  readonly failed: Readonly<Record<string, string>>;
  /** Base URL of the worker's inspection endpoint (docs/console.md: `/tree`, `/events`, `/metrics`), or null when it serves none. */
  readonly inspectUrl?: string | null;
  /** The broker its partitions consume and publish through (kind, url, scope), so that `clusterStatus` and clients can reach it; null when the broker does not say. */
  readonly broker?: BrokerIdentity | null;
  /**
   * The checkpoint store its partitions put to and restore from (`CheckpointStore.location`), or
   * null without one: every worker of a cluster must give the same, or a partition it takes
   * cannot find its state (`checkClusterCheckpoints`). Absent in reports of older workers.
   */
  readonly checkpoints?: string | null;
  /**
   * Standby workers per partition it asks for (`WorkerOptions.standbyReplicas`): the leader
   * keeps the most any live worker asks for. Absent in reports of older workers (0).
   */
  readonly standbyReplicas?: number;
  /**
   * Its lease and heartbeat periods, ms: its membership key is written with a time to live of
   * `leaseMs` every `heartbeatMs`, so the key's remaining time says how long it has been silent
   * (`clusterStatus`). Absent in reports of older workers.
   */
  readonly leaseMs?: number;
  readonly heartbeatMs?: number;
}

/**
 * Records the topology's stages as the cluster's, or checks them against the recorded ones:
 * every worker of a cluster must run the same stages with the same partition counts and
 * `config` (a topology's column families with their merge operators, and its outputs). A
 * record without `config` (an older build's) takes this worker's when nothing else differs.
 * @throws InvalidArgumentError naming both when they differ
 */
export async function checkClusterTopology(redis: Redis, keys: ClusterKeys, stages: readonly ClusterStage[]): Promise<void> {
  const mine = JSON.stringify(stages);
  await redis.set(keys.topology, mine, 'NX');
  let recorded = await redis.get(keys.topology);
  // A record written by an older build, whose stages did not record their `config` (the
  // column families and outputs): taken as this worker's when nothing else differs, so that
  // workers of this build compare against the whole.
  if (recorded !== null && recorded !== mine && JSON.stringify((JSON.parse(recorded) as ClusterStage[]).map((r, i) => (r.config === undefined && stages[i]?.config !== undefined ? { ...r, config: stages[i]!.config } : r))) === mine) {
    if ((await redis.set(keys.topology, mine, 'XX', 'GET')) === recorded) recorded = mine;
    else recorded = await redis.get(keys.topology);
  }
  if (recorded !== mine) {
    throw new InvalidArgumentError(
      `cluster ${keys.clusterName} runs other stages than this worker (${stageDifferences(recorded ? (JSON.parse(recorded) as ClusterStage[]) : [], stages)}): ` +
        `start it with the cluster's topology (the same partition counts and configuration), or use another cluster name. The cluster runs ${recorded}, this worker's topology has ${mine}`,
    );
  }
}

/** What differs between the recorded stages and a worker's, field by field: `stage index: partitions 8, this worker 16`. */
function stageDifferences(recorded: readonly ClusterStage[], mine: readonly ClusterStage[]): string {
  const out: string[] = [];
  for (const r of recorded) {
    const m = mine.find((s) => s.name === r.name);
    if (!m) {
      out.push(`stage ${r.name}: not in this worker`);
      continue;
    }
    for (const field of ['namespace', 'subscription', 'partitions', 'config'] as const) {
      if (r[field] !== m[field]) out.push(`stage ${r.name}: ${field} ${JSON.stringify(r[field] ?? null)}, this worker ${JSON.stringify(m[field] ?? null)}`);
    }
  }
  for (const m of mine) if (!recorded.some((r) => r.name === m.name)) out.push(`stage ${m.name}: not in the cluster`);
  return out.join('; ') || 'their order';
}

/**
 * Refuses a worker whose broker is of another kind than the live workers', or in another
 * scope (Redis key prefix, Pulsar tenant): Redis Streams and Pulsar topics never meet, nor do
 * two prefixes' streams, so its partitions would consume nothing the others publish, and asks
 * routed to it would wait for ever. (The address is not compared: machines may name one
 * broker differently.)
 * @throws InvalidArgumentError naming both kinds or scopes
 */
export async function checkClusterBroker(redis: Redis, keys: ClusterKeys, broker: BrokerIdentity | undefined): Promise<void> {
  if (!broker) return;
  const members = await liveMembers(redis, keys);
  const other = members.find((m) => m.broker && m.broker.kind !== broker.kind);
  if (other) {
    throw new InvalidArgumentError(
      `cluster ${keys.clusterName}'s workers use a ${other.broker!.kind} broker (worker ${other.id}: ${other.broker!.url ?? ''}), this worker a ${broker.kind} one: give every worker and client of a cluster the same --broker`,
    );
  }
  const scoped = members.find((m) => m.broker && (m.broker.scope ?? '') !== (broker.scope ?? ''));
  if (scoped) {
    throw new InvalidArgumentError(
      `cluster ${keys.clusterName}'s workers use broker scope ${JSON.stringify(scoped.broker!.scope ?? '')} (worker ${scoped.id}), this worker ${JSON.stringify(broker.scope ?? '')}: ` +
        'their topics never meet; open every worker\'s and client\'s broker with clusterBrokerIdentity(spec, clusterName) (docs/cluster.md, "Commands")',
    );
  }
}

/**
 * Refuses a worker whose checkpoint store (`location`: `CheckpointStore.location`, undefined
 * without one) differs from a live member's, or from the one the cluster recorded while any
 * of its partitions has been started: a partition it took would not find its state there
 * (it would start from nothing, or from a stale copy in its data dir: found by a new user, a
 * click counter moved to another store restarted at 0), and one it put would be lost to the
 * others. The first worker with a store records it (`ClusterKeys.checkpoints`); before any
 * partition started, a worker with another store records its own instead.
 * @throws InvalidArgumentError naming the other worker or the record and both stores; the connection's errors
 */
export async function checkClusterCheckpoints(redis: Redis, keys: ClusterKeys, location: string | undefined): Promise<void> {
  const mine = location ?? null;
  const name = (u: string | null | undefined) => (u ? u : 'none');
  const other = (await liveMembers(redis, keys)).find((m) => m.checkpoints !== undefined && m.checkpoints !== mine);
  if (other) {
    throw new InvalidArgumentError(
      `cluster ${keys.clusterName}'s workers use checkpoint store ${name(other.checkpoints)} (worker ${other.id}), this worker ${name(mine)}: give every worker of a cluster the same --checkpoints (or none to all)`,
    );
  }
  if (location !== undefined) await redis.set(keys.checkpoints, location, 'NX');
  const recorded = await redis.get(keys.checkpoints);
  if (recorded === null || recorded === mine) return;
  const started = await redis.hlen(keys.started);
  if (started === 0) {
    if (location !== undefined) await redis.set(keys.checkpoints, location);
    return;
  }
  throw new InvalidArgumentError(
    `cluster ${keys.clusterName} ran its partitions (${started} started) with checkpoint store ${recorded}, this worker has ${name(mine)}: ` +
      `a partition it took would start without the state stored there. Give --checkpoints ${recorded.replace(/ at .*$/, '')} (with the same AWS_ENDPOINT_URL); ` +
      'a cluster keeps its checkpoint store while its partitions hold state (another cluster name starts one afresh; docs/checkpoints.md, "What survives what")',
  );
}

/** The stages recorded for the cluster, or undefined before any worker joined. */
export async function readClusterTopology(redis: Redis, keys: ClusterKeys): Promise<ClusterStage[] | undefined> {
  const recorded = await redis.get(keys.topology);
  return recorded ? (JSON.parse(recorded) as ClusterStage[]) : undefined;
}

/**
 * A worker's join: writes `report` under `member:<id>` with `PX ttlMs` and adds the id to the
 * member set (its later heartbeats are the lease keeper's), in one script that checks the
 * cluster's retiring marker first, so that a worker either joined before `retireCluster`
 * looked for live workers (and is seen), or is refused.
 * @throws InvalidArgumentError while the cluster is being retired; the connection's errors
 */
export async function joinCluster(redis: Redis, keys: ClusterKeys, report: MemberReport, ttlMs: number): Promise<void> {
  const joined = await runClusterScript(redis, 'join', [keys.member(report.id), keys.members, keys.retiring], [report.id, JSON.stringify(report), ttlMs]);
  if (Number(joined) !== 1) throw new InvalidArgumentError(`cluster ${keys.clusterName} is being retired (\`shardflow cluster retire\`): start the worker once that is done (then the cluster begins afresh)`);
}

/** Leaves the cluster at once (the leader reassigns the worker's partitions at its next round). */
export async function leaveCluster(redis: Redis, keys: ClusterKeys, id: string): Promise<void> {
  await redis.multi().del(keys.member(id)).srem(keys.members, id).exec();
}

/**
 * The live members, by id order: those whose membership key has not expired. Ids whose key
 * expired are removed from the member set.
 * @throws the connection's errors
 */
export async function liveMembers(redis: Redis, keys: ClusterKeys): Promise<MemberReport[]> {
  const ids = (await redis.smembers(keys.members)).sort();
  if (ids.length === 0) return [];
  const values = await redis.mget(ids.map((id) => keys.member(id)));
  const dead = ids.filter((_, i) => values[i] === null);
  if (dead.length > 0) await redis.srem(keys.members, ...dead);
  return values.flatMap((v) => (v === null ? [] : [JSON.parse(v) as MemberReport]));
}
