import type { Redis } from 'ioredis';
import { assignPartitions, type AssignmentResult } from './assignment.js';
import type { ClusterKeys } from './keys.js';
import { acquireLease, releaseLease, renewLeases, type Lease, type LeaseTiming } from './lease.js';
import { liveMembers } from './membership.js';
import { runClusterScript } from './scripts.js';
import { unitKey, type PartitionUnit } from './units.js';

/** The `standbys` hash read back: unit -> member ids. */
export function parseStandbys(hash: Readonly<Record<string, string>>): Map<string, string[]> {
  return new Map(Object.entries(hash).map(([u, ids]) => [u, ids.split(',').filter((id) => id.length > 0)]));
}

/** What one assignment round of the leader did (see `assignPartitions`), and the round number it wrote. */
export interface AssignmentRound extends AssignmentResult {
  /** The `assignment:round` counter after the write; undefined when nothing changed (nothing written). */
  readonly round: number | undefined;
  /** Moves under way before this round (a unit's lease held by a live worker other than its assignee), counted against the limit. */
  readonly inFlight: number;
}

/**
 * The leader part of a worker: every worker competes for the leader lease (`SET NX PX`, renewed
 * by compare-and-expire, its epoch counted by `leader:epoch`); the holder runs assignment
 * rounds. Its writes are fenced in Redis itself: the write script refuses unless the leader key
 * still holds this lease's value, so a leader that was paused past its lease writes nothing.
 *
 * A round reads the live members, the assignment and every unit's lease holder; moves under
 * way (held by a live worker other than the assignee) count against `maxMoves`, so at most
 * `maxMoves` units are between owners at any time (Akka's rebalance limit, here over moves in
 * flight rather than per round).
 */
export class LeaderRole {
  #lease: Lease | undefined;

  constructor(
    readonly redis: Redis,
    readonly keys: ClusterKeys,
    readonly memberId: string,
    readonly timing: LeaseTiming,
    readonly units: readonly PartitionUnit[],
    /** Most units between owners at a time. */
    readonly maxMoves: number,
  ) {}

  /** The leader lease's epoch while this worker leads, else undefined. */
  get epoch(): number | undefined {
    return this.#lease?.held ? this.#lease.epoch : undefined;
  }

  /**
   * Takes or renews the leader lease; while it holds it, runs one assignment round.
   * @returns the round when this worker led it (`becameLeader` on the first), else undefined
   * @throws the connection's errors
   */
  async tick(): Promise<(AssignmentRound & { readonly becameLeader: boolean }) | undefined> {
    let becameLeader = false;
    if (this.#lease) {
      await renewLeases(this.redis, [this.#lease], this.timing.leaseMs);
      if (!this.#lease.held) this.#lease = undefined;
    }
    if (!this.#lease) {
      const got = await acquireLease(this.redis, { key: this.keys.leader, epochKey: this.keys.leaderEpoch, what: `cluster ${this.keys.clusterName} leader` }, this.memberId, this.timing);
      if (got.kind !== 'acquired') return undefined;
      this.#lease = got.lease;
      becameLeader = true;
    }
    const round = await this.round(this.#lease);
    return round && { ...round, becameLeader };
  }

  /** One assignment round under `lease`; undefined when the write found the lease gone. */
  async round(lease: Lease): Promise<AssignmentRound | undefined> {
    const names = this.units.map(unitKey);
    // Sent together: the members, the assignment, the standbys (an empty hash when no worker
    // keeps standbys) and the units' leases, in the round trip of the members' set.
    const [members, assignment, standbyHash, holders] = await Promise.all([
      liveMembers(this.redis, this.keys),
      this.redis.hgetall(this.keys.assignment),
      this.redis.hgetall(this.keys.standbys),
      names.length ? this.redis.mget(names.map((u) => this.keys.lease(u))) : Promise.resolve([]),
    ]);
    const current = new Map(Object.entries(assignment));
    const live = new Set(members.map((m) => m.id));
    let inFlight = 0;
    names.forEach((u, i) => {
      const holder = holders[i]?.split(' ')[0];
      if (holder !== undefined && live.has(holder) && current.get(u) !== holder) inFlight++;
    });
    const standbyReplicas = Math.max(0, ...members.map((m) => m.standbyReplicas ?? 0));
    const standbys = parseStandbys(standbyHash);
    const result = assignPartitions({
      units: this.units,
      workers: members.map((m) => ({ id: m.id, maxPartitions: m.maxPartitions ?? Infinity, standby: (m.standbyReplicas ?? 0) > 0 })),
      current,
      maxMoves: Math.max(0, this.maxMoves - inFlight),
      standbyReplicas,
      standbys,
    });
    await this.#writeStandbys(lease, standbys, result.standbys);
    const set = [...result.assignment].filter(([u, w]) => current.get(u) !== w);
    const removed = [...current.keys()].filter((u) => !result.assignment.has(u));
    if (set.length === 0 && removed.length === 0) return { ...result, round: undefined, inFlight };
    if (!lease.held) {
      this.#lease = undefined;
      return undefined;
    }
    const round = Number(
      await runClusterScript(this.redis, 'writeAssignment', [this.keys.leader, this.keys.assignment, this.keys.assignmentRound], [lease.value, set.length, ...set.flat(), ...removed]),
    );
    if (round === -1) {
      lease.lose('the leader key no longer holds this epoch');
      this.#lease = undefined;
      return undefined;
    }
    return { ...result, round, inFlight };
  }

  /**
   * Writes the standbys that changed (`standbys` hash: unit -> comma-separated member ids).
   * Not fenced like the assignment: standbys only say where to keep warm copies and which
   * worker a unit without an owner goes to first, so a paused leader's late write costs a
   * fetch, never a wrong owner.
   */
  async #writeStandbys(lease: Lease, before: ReadonlyMap<string, readonly string[]>, after: ReadonlyMap<string, readonly string[]>): Promise<void> {
    const set: string[] = [];
    for (const [u, ids] of after) if ((before.get(u) ?? []).join(',') !== ids.join(',')) set.push(u, ids.join(','));
    const removed = [...before.keys()].filter((u) => !after.has(u));
    if ((set.length === 0 && removed.length === 0) || !lease.held) return;
    const tx = this.redis.multi();
    if (set.length) tx.hset(this.keys.standbys, ...set);
    if (removed.length) tx.hdel(this.keys.standbys, ...removed);
    await tx.exec();
  }

  /** Hands the leader lease back (a worker that stops). */
  async resign(): Promise<void> {
    const lease = this.#lease;
    this.#lease = undefined;
    if (lease) await releaseLease(this.redis, lease);
  }
}
