import { InvalidArgumentError } from '../errors.js';
import { unitKey, type PartitionUnit } from './units.js';

/** A live worker as assignment sees it. */
export interface AssignableWorker {
  readonly id: string;
  /** Most units it may hold, an integer >= 0 or `Infinity`. */
  readonly maxPartitions: number;
  /** It keeps standbys warm (its own `standbyReplicas` is above 0); default true. Only such workers are made standbys. */
  readonly standby?: boolean;
}

/** Input of {@link assignPartitions}. */
export interface AssignmentInput {
  /** Every unit to place, in a stable order (stage by stage, partitions in order). */
  readonly units: readonly PartitionUnit[];
  /** The live workers. */
  readonly workers: readonly AssignableWorker[];
  /** The assignment so far, unit key (`<stage>/<partition>`) -> worker id; entries of workers not live or of unknown units are dropped. */
  readonly current: ReadonlyMap<string, string>;
  /** Most rebalancing moves this round (a unit taken from one live worker and given to another), an integer >= 0. */
  readonly maxMoves: number;
  /** Standby workers per unit to choose (Kafka Streams' `num.standby.replicas`), an integer >= 0; default 0. */
  readonly standbyReplicas?: number;
  /** The standbys so far, unit key -> worker ids (kept where still live and not the owner). */
  readonly standbys?: ReadonlyMap<string, readonly string[]>;
}

/** A unit given from one live worker to another. */
export interface Move {
  readonly unit: string;
  readonly from: string;
  readonly to: string;
}

/** Output of {@link assignPartitions}. */
export interface AssignmentResult {
  /** Unit key -> worker id, for every placed unit. */
  readonly assignment: Map<string, string>;
  /** Units that had no live owner (new, or their worker left) and were placed. Not moves: they must go somewhere. */
  readonly placed: string[];
  /** Rebalancing moves made, at most `maxMoves`. */
  readonly moves: Move[];
  /** Units no live worker has room for (every `maxPartitions` reached). */
  readonly unplaced: string[];
  /** Unit key -> its standby workers (at most `standbyReplicas`, never its owner), for every placed unit that has one. */
  readonly standbys: Map<string, string[]>;
  /** Placed units given to one of their standbys (a warm copy of their latest checkpoint). */
  readonly placedOnStandby: string[];
}

/**
 * Assigns partition units to live workers: balanced by count, sticky, with a bounded number
 * of moves per round (Akka's `LeastShardAllocationStrategy`: unallocated shards go to the
 * least loaded region at once, rebalancing moves at most `rebalanceLimit` shards per round
 * from the most to the least loaded).
 *
 * 1. Each unit stays with its current worker when that worker is live and under its
 *    `maxPartitions` (units in input order keep their places first).
 * 2. Each other unit goes to the worker with room that holds the fewest units, then the
 *    fewest of the unit's stage, then the first in `workers` order.
 * 3. While fewer than `maxMoves` moves were made and the most loaded worker holds at least
 *    2 more units than the least loaded one with room, one unit moves from the first to the
 *    second: of the stage the donor holds most more of than the receiver, the highest
 *    partition.
 *
 * Step 3 moves a unit only from a worker above the balance to one below it and never moves a
 * unit twice, so a join moves exactly the units the balance needs (sum over workers of their
 * excess) and a leave moves only the leaver's units (placed in step 2); once balanced, the
 * result is a fixed point (the same input gives no moves).
 *
 * With `standbyReplicas` (docs/cluster.md, "Warm standbys"): in step 2 the units one of whose
 * standbys (in `standbys` order) has room and holds no more units than the least loaded worker
 * go first, each to that standby (Kafka Streams' high-availability assignor gives an active
 * task to a caught-up client first, KIP-441; here only within the balance, so a leave still
 * moves only the leaver's units). Then standbys are chosen among the workers with room that
 * keep standbys (`AssignableWorker.standby`): each unit keeps those it had that are still such
 * workers and not its owner, gets more, up to `standbyReplicas`, from the workers holding the
 * fewest standbys (then the fewest units, then the first in `workers` order), and while one
 * worker holds 2 standbys more than another, one of its standbys passes to that other (a
 * worker that joined gets its share).
 *
 * @throws InvalidArgumentError for a bad `maxMoves`, `standbyReplicas` or `maxPartitions`, or a duplicate worker id
 */
export function assignPartitions(input: AssignmentInput): AssignmentResult {
  const { units, workers, current, maxMoves } = input;
  const standbyReplicas = input.standbyReplicas ?? 0;
  const previousStandbys = input.standbys ?? new Map<string, readonly string[]>();
  if (!Number.isInteger(maxMoves) || maxMoves < 0) throw new InvalidArgumentError(`maxMoves must be an integer >= 0, got ${maxMoves}`);
  if (!Number.isInteger(standbyReplicas) || standbyReplicas < 0) throw new InvalidArgumentError(`standbyReplicas must be an integer >= 0, got ${standbyReplicas}`);
  const loads = new Map<string, WorkerLoad>();
  for (const w of workers) {
    if (!(w.maxPartitions === Infinity || (Number.isInteger(w.maxPartitions) && w.maxPartitions >= 0))) {
      throw new InvalidArgumentError(`worker ${w.id}: maxPartitions must be an integer >= 0 or Infinity, got ${w.maxPartitions}`);
    }
    if (loads.has(w.id)) throw new InvalidArgumentError(`worker id ${w.id} is given twice`);
    loads.set(w.id, new WorkerLoad(w.id, w.maxPartitions));
  }
  const assignment = new Map<string, string>();
  const orphans: PartitionUnit[] = [];
  for (const unit of units) {
    const load = loads.get(current.get(unitKey(unit)) ?? '');
    if (load?.hasRoom()) {
      load.add(unit);
      assignment.set(unitKey(unit), load.id);
    } else orphans.push(unit);
  }
  const placed: string[] = [];
  const placedOnStandby: string[] = [];
  const unplaced: string[] = [];
  // Orphans whose standby is among the least loaded workers go first, each to that standby;
  // the others as without standbys. A standby takes a unit only while it holds no more than
  // the least loaded worker with room, so the placement stays as balanced as without standbys.
  const pending = [...orphans];
  while (pending.length > 0) {
    let index = 0;
    let to: WorkerLoad | undefined;
    let warm = false;
    const least = leastLoaded(loads.values());
    if (least && standbyReplicas > 0) {
      for (let i = 0; i < pending.length && !warm; i++) {
        const standby = (previousStandbys.get(unitKey(pending[i]!)) ?? []).map((id) => loads.get(id)).find((l) => l?.hasRoom() && l.count <= least.count);
        if (standby) {
          index = i;
          to = standby;
          warm = true;
        }
      }
    }
    const unit = pending.splice(index, 1)[0]!;
    to ??= leastLoaded(loads.values(), unit.stage);
    if (!to) {
      unplaced.push(unitKey(unit));
      continue;
    }
    if (warm) placedOnStandby.push(unitKey(unit));
    to.add(unit);
    assignment.set(unitKey(unit), to.id);
    placed.push(unitKey(unit));
  }
  const moves: Move[] = [];
  while (moves.length < maxMoves) {
    const to = leastLoaded(loads.values());
    const from = mostLoaded(loads.values());
    if (!to || !from || from.count - to.count < 2) break;
    const unit = from.unitToGive(to);
    from.remove(unit);
    to.add(unit);
    assignment.set(unitKey(unit), to.id);
    moves.push({ unit: unitKey(unit), from: from.id, to: to.id });
  }
  return { assignment, placed, moves, unplaced, standbys: chooseStandbys(units, workers, loads, assignment, previousStandbys, standbyReplicas), placedOnStandby };
}

/** The standbys of each assigned unit (see `assignPartitions`). */
function chooseStandbys(
  units: readonly PartitionUnit[], workers: readonly AssignableWorker[], loads: ReadonlyMap<string, WorkerLoad>, assignment: ReadonlyMap<string, string>,
  previous: ReadonlyMap<string, readonly string[]>, replicas: number,
): Map<string, string[]> {
  const out = new Map<string, string[]>();
  if (replicas === 0) return out;
  // Candidates: workers that keep standbys and could take a unit (a full one never would).
  const candidates = workers.filter((w) => w.standby !== false && loads.get(w.id)!.hasRoom());
  const held = new Map(candidates.map((w) => [w.id, 0]));
  const owned = (id: string): number => loads.get(id)!.count;
  const chosen: Array<[string, string, string[]]> = [];
  // First every unit keeps what it can, so that new picks see the counts kept.
  for (const unit of units) {
    const key = unitKey(unit);
    const owner = assignment.get(key);
    if (owner === undefined) continue;
    const kept = (previous.get(key) ?? []).filter((id, i, all) => id !== owner && held.has(id) && all.indexOf(id) === i).slice(0, replicas);
    for (const id of kept) held.set(id, held.get(id)! + 1);
    chosen.push([key, owner, kept]);
  }
  for (const [, owner, list] of chosen) {
    while (list.length < replicas) {
      let best: AssignableWorker | undefined;
      for (const w of candidates) {
        if (w.id === owner || list.includes(w.id)) continue;
        if (!best || held.get(w.id)! < held.get(best.id)! || (held.get(w.id) === held.get(best.id) && owned(w.id) < owned(best.id))) best = w;
      }
      if (!best) break;
      list.push(best.id);
      held.set(best.id, held.get(best.id)! + 1);
    }
  }
  // Spread: from the worker holding the most standbys to the one holding the fewest, while
  // they differ by 2 or more and a unit can pass (each pass lowers the spread's sum of squares).
  for (let guard = 0; guard < units.length * Math.max(1, replicas); guard++) {
    const ids = [...held.keys()];
    if (ids.length < 2) break;
    const most = ids.reduce((a, b) => (held.get(b)! > held.get(a)! ? b : a));
    const fewest = ids.reduce((a, b) => (held.get(b)! < held.get(a)! ? b : a));
    if (held.get(most)! - held.get(fewest)! < 2) break;
    const entry = chosen.find(([, owner, list]) => list.includes(most) && owner !== fewest && !list.includes(fewest));
    if (!entry) break;
    entry[2][entry[2].indexOf(most)] = fewest;
    held.set(most, held.get(most)! - 1);
    held.set(fewest, held.get(fewest)! + 1);
  }
  for (const [key, , list] of chosen) if (list.length) out.set(key, list);
  return out;
}

/** The units one worker holds during an assignment. */
class WorkerLoad {
  readonly #units: PartitionUnit[] = [];
  readonly #perStage = new Map<string, number>();
  constructor(readonly id: string, readonly max: number) {}

  get count(): number {
    return this.#units.length;
  }
  hasRoom(): boolean {
    return this.#units.length < this.max;
  }
  ofStage(stage: string): number {
    return this.#perStage.get(stage) ?? 0;
  }
  add(unit: PartitionUnit): void {
    this.#units.push(unit);
    this.#perStage.set(unit.stage, this.ofStage(unit.stage) + 1);
  }
  remove(unit: PartitionUnit): void {
    this.#units.splice(this.#units.indexOf(unit), 1);
    this.#perStage.set(unit.stage, this.ofStage(unit.stage) - 1);
  }
  /** The unit to give `to`: of the stage this worker holds most more of than `to`, the highest partition. */
  unitToGive(to: WorkerLoad): PartitionUnit {
    let best = this.#units[0]!;
    let bestGap = -Infinity;
    for (const u of this.#units) {
      const gap = this.ofStage(u.stage) - to.ofStage(u.stage);
      if (gap > bestGap || (gap === bestGap && u.stage === best.stage && u.partition > best.partition)) {
        best = u;
        bestGap = gap;
      }
    }
    return best;
  }
}

/** The worker with room holding the fewest units (then the fewest of `stage`, then the first). */
function leastLoaded(loads: Iterable<WorkerLoad>, stage?: string): WorkerLoad | undefined {
  let best: WorkerLoad | undefined;
  for (const l of loads) {
    if (!l.hasRoom()) continue;
    if (!best || l.count < best.count || (l.count === best.count && stage !== undefined && l.ofStage(stage) < best.ofStage(stage))) best = l;
  }
  return best;
}

/** The worker holding the most units (the first of those). */
function mostLoaded(loads: Iterable<WorkerLoad>): WorkerLoad | undefined {
  let best: WorkerLoad | undefined;
  for (const l of loads) if (!best || l.count > best.count) best = l;
  return best;
}
