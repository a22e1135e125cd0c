import type { Redis } from 'ioredis';
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
  /** Units the worker refused to run, with the reason (a store of another shape, a corrupt store). */
  readonly failed: Readonly<Record<string, string>>;
  /** Base URL of the worker's inspection endpoint (docs/console.md: `/tree`, `/events`, `/metrics`), or null when it serves none. */
  readonly inspectUrl?: string | null;
  /** The broker its partitions consume and publish through (kind, url, scope), so that `clusterStatus` and clients can reach it; null when the broker does not say. */
  readonly broker?: BrokerIdentity | null;
}

/**
 * Records the topology's stages as the cluster's, or checks them against the recorded ones:
 * every worker of a cluster must run the same stages with the same partition counts.
 * @throws InvalidArgumentError naming both when they differ
 */
export async function checkClusterTopology(redis: Redis, keys: ClusterKeys, stages: readonly ClusterStage[]): Promise<void> {
  const mine = JSON.stringify(stages);
  await redis.set(keys.topology, mine, 'NX');
  const recorded = await redis.get(keys.topology);
  if (recorded !== mine) {
    throw new InvalidArgumentError(
      `cluster ${keys.clusterName} runs stages ${recorded}, this worker's topology has ${mine}: start it with the cluster's topology, or use another cluster name`,
    );
  }
}

/** The stages recorded for the cluster, or undefined before any worker joined. */
export async function readClusterTopology(redis: Redis, keys: ClusterKeys): Promise<ClusterStage[] | undefined> {
  const recorded = await redis.get(keys.topology);
  return recorded ? (JSON.parse(recorded) as ClusterStage[]) : undefined;
}

/**
 * Joins or renews membership: writes `report` under `member:<id>` with `PX ttlMs` and adds
 * the id to the member set (a worker that was paused past its TTL joins again this way).
 * @throws the connection's errors
 */
export async function heartbeat(redis: Redis, keys: ClusterKeys, report: MemberReport, ttlMs: number): Promise<void> {
  await redis.multi().set(keys.member(report.id), JSON.stringify(report), 'PX', ttlMs).sadd(keys.members, report.id).exec();
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
