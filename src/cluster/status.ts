import type { Redis } from 'ioredis';
import type { Broker } from '../runtime/brokers/broker.js';
import { partitionId } from '../runtime/ids.js';
import { topic } from '../runtime/topics.js';
import { CLUSTER_NAME, ClusterKeys, DEFAULT_CLUSTER_PREFIX } from './keys.js';
import { liveMembers, readClusterTopology, type MemberReport } from './membership.js';
import { connectCoordination } from './redisConnection.js';
import { parseStandbys } from './leader.js';
import { allUnits, parseUnitKey, unitKey, type ClusterStage } from './units.js';

/** One partition unit as `clusterStatus` sees it. */
export interface PartitionStatus {
  readonly stage: string;
  readonly partition: number;
  /** `<stage>/<partition>`. */
  readonly unit: string;
  /** The member the leader assigned it to. */
  readonly assignedTo: string | undefined;
  /** The member holding its lease now. */
  readonly owner: string | undefined;
  /** The lease's epoch while held; else the last epoch given (0: never owned). */
  readonly epoch: number;
  /** ms before the lease key expires in Redis (undefined when not held). */
  readonly leaseMsLeft: number | undefined;
  /**
   * From the owner's report: `running`, `opening` (waiting for the store); `failed` when its
   * assignee refused it (with `reason`); `unowned` without a lease holder; `silent` when the
   * owner still holds the lease but has missed two heartbeats (`silentMs` of its worker: killed,
   * stopped, or cut off from Redis; with `reason`): its partition runs nowhere it can be seen,
   * and its lease runs out in `leaseMsLeft` (found by a new user: a SIGKILLed worker's
   * partitions showed `running` until their leases ran out). A `running` partition whose
   * checkpoint puts fail has a `reason` too (how long, the last error; found by a new user: during an
   * S3 outage partitions showed `running` while their acks waited).
   */
  readonly state: 'running' | 'opening' | 'failed' | 'unowned' | 'silent';
  readonly reason?: string;
  /** Messages of the stage's subscription (`ClusterStage.subscription`) on the partition's input not acked yet (with a broker that counts them). */
  readonly backlog?: number | undefined;
  /** The members keeping its checkpoints warm (`WorkerOptions.standbyReplicas`); empty without standbys. */
  readonly standbys: readonly string[];
}

/** A cluster at one instant: stages, leader, live workers, and every partition's assignment, owner and lease epoch. */
export interface ClusterStatus {
  readonly cluster: string;
  /** The stages the cluster runs; undefined before any worker joined. */
  readonly stages: ClusterStage[] | undefined;
  readonly leader: { readonly worker: string; readonly epoch: number; readonly leaseMsLeft: number } | undefined;
  /** Assignment writes so far. */
  readonly assignmentRound: number;
  /**
   * Live workers (membership key not expired), with how many leases each holds and `silentMs`:
   * ms since its last heartbeat (from its key's remaining time; undefined for a worker whose
   * report gives no `leaseMs`).
   */
  readonly workers: ReadonlyArray<MemberReport & { readonly leases: number; readonly silentMs?: number }>;
  readonly partitions: readonly PartitionStatus[];
}

/** Options of {@link clusterStatus}. */
export interface ClusterStatusOptions {
  /** Redis URL of the cluster's coordination. */
  readonly cluster: string;
  readonly clusterName: string;
  /** Prefix of the cluster's keys (default `sfc:`). */
  readonly keyPrefix?: string;
  /** With a broker that counts backlogs (Redis Streams, Pulsar), each partition's backlog. */
  readonly broker?: Broker;
}

/**
 * Reads a cluster's status from Redis (its own connection, closed before returning).
 * @throws BrokerDisconnectedError when Redis does not answer; InvalidArgumentError for a bad cluster name
 */
export async function clusterStatus(options: ClusterStatusOptions): Promise<ClusterStatus> {
  const keys = new ClusterKeys(options.clusterName, options.keyPrefix);
  const redis = await connectCoordination(options.cluster, 5000);
  try {
    return await readClusterStatus(redis, keys, options.broker);
  } finally {
    redis.disconnect();
  }
}

/** `clusterStatus` on an open connection. */
export async function readClusterStatus(redis: Redis, keys: ClusterKeys, broker?: Broker): Promise<ClusterStatus> {
  const stages = await readClusterTopology(redis, keys);
  const members = await liveMembers(redis, keys);
  const units = allUnits(stages ?? []).map(unitKey);
  const assignment = await redis.hgetall(keys.assignment);
  const standbys = parseStandbys(await redis.hgetall(keys.standbys));
  const read = redis.pipeline().get(keys.leader).pttl(keys.leader).get(keys.assignmentRound);
  for (const u of units) read.get(keys.lease(u)).pttl(keys.lease(u)).get(keys.epoch(u));
  const replies = ((await read.exec()) ?? []).map(([err, v]) => {
    if (err) throw err;
    return v;
  });
  const [leaderValue, leaderTtl, round] = replies as [string | null, number, string | null];
  const byId = new Map(members.map((m) => [m.id, m]));
  const silence = await memberSilence(redis, keys, members);
  const leases = new Map<string, number>();
  const partitions = units.map((unit, i): PartitionStatus => {
    const [value, ttl, counter] = replies.slice(3 + 3 * i, 6 + 3 * i) as [string | null, number, string | null];
    const [owner, epoch] = value ? value.split(' ') : [];
    if (owner) leases.set(owner, (leases.get(owner) ?? 0) + 1);
    const assignee = assignment[unit];
    const report = byId.get(owner ?? assignee ?? '');
    const failed = report?.failed[unit]; // a refused unit has no owner: its assignee says why
    const silentMs = owner ? silence.get(owner) : undefined;
    const silent = owner !== undefined && failed === undefined && (report === undefined || (silentMs !== undefined && report.heartbeatMs !== undefined && silentMs > 2 * report.heartbeatMs));
    const state = failed !== undefined ? 'failed' : !owner ? 'unowned' : silent ? 'silent' : report?.running.includes(unit) ? 'running' : 'opening';
    const waiting = state === 'opening' ? report?.waiting?.[unit] : undefined;
    const failing = state === 'running' ? report?.checkpointsFailing?.[unit] : undefined;
    const stalled = failing !== undefined ? `its checkpoints fail ${failing}; its acks and outputs wait for one (it stops taking messages once its receiver queue fills)` : undefined;
    const why = failed ?? waiting ?? stalled ?? (silent ? (report ? `owner ${owner} has sent no heartbeat for ${silentMs} ms (killed, stopped or cut off from Redis)` : `owner ${owner} is no live member (its membership ran out)`) + `: its lease runs out in ${value ? ttl : 0} ms, then the partition moves` : undefined);
    return {
      ...parseUnitKey(unit),
      unit,
      assignedTo: assignee,
      owner,
      epoch: Number(epoch ?? counter ?? 0),
      leaseMsLeft: value ? ttl : undefined,
      state,
      ...(why !== undefined ? { reason: why } : {}),
      standbys: (standbys.get(unit) ?? []).filter((id) => byId.has(id)),
    };
  });
  const withBacklog = broker?.subscriptionBacklog
    ? await Promise.all(
        partitions.map(async (p) => {
          const stage = stages!.find((s) => s.name === p.stage)!;
          return { ...p, backlog: await broker.subscriptionBacklog!(topic(stage.namespace, partitionId(p.partition)), stage.subscription ?? p.stage) };
        }),
      )
    : partitions;
  const [leaderId, leaderEpoch] = leaderValue ? leaderValue.split(' ') : [];
  return {
    cluster: keys.clusterName,
    stages,
    leader: leaderId ? { worker: leaderId, epoch: Number(leaderEpoch), leaseMsLeft: leaderTtl } : undefined,
    assignmentRound: Number(round ?? 0),
    workers: members.map((m) => ({ ...m, leases: leases.get(m.id) ?? 0, ...(silence.has(m.id) ? { silentMs: silence.get(m.id)! } : {}) })),
    partitions: withBacklog,
  };
}

/**
 * Ms since each member's last heartbeat: its key is written with a time to live of its
 * `leaseMs` at every heartbeat, so `leaseMs - PTTL` (no clock of the reader involved). Members
 * whose report gives no `leaseMs` (older workers) are left out.
 */
async function memberSilence(redis: Redis, keys: ClusterKeys, members: readonly MemberReport[]): Promise<Map<string, number>> {
  const timed = members.filter((m) => m.leaseMs !== undefined);
  if (timed.length === 0) return new Map();
  const read = redis.pipeline();
  for (const m of timed) read.pttl(keys.member(m.id));
  const ttls = ((await read.exec()) ?? []).map(([err, v]) => (err ? -2 : Number(v)));
  return new Map(timed.flatMap((m, i) => (ttls[i]! >= 0 ? [[m.id, Math.max(0, m.leaseMs! - ttls[i]!)] as const] : [])));
}

/**
 * The names of the clusters that recorded a topology in the Redis at `cluster` under
 * `keyPrefix` (default `sfc:`), sorted: what `shardflow cluster status` offers when no
 * cluster name is given. Reads with SCAN (never blocks the server).
 * @throws BrokerDisconnectedError when Redis does not answer
 */
export async function listClusters(cluster: string, keyPrefix = DEFAULT_CLUSTER_PREFIX): Promise<string[]> {
  const redis = await connectCoordination(cluster, 5000);
  try {
    const names = new Set<string>();
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${keyPrefix}*:topology`, 'COUNT', 1000);
      cursor = next;
      for (const k of keys) {
        const name = k.slice(keyPrefix.length, -':topology'.length);
        if (CLUSTER_NAME.test(name)) names.add(name);
      }
    } while (cursor !== '0');
    return [...names].sort();
  } finally {
    redis.disconnect();
  }
}
