import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { BrokerDataLostError, DataDirError } from '../../errors.js';
import type { Logger } from '../actor/logger.js';
import type { Broker } from '../brokers/broker.js';
import type { BrokerIdentity } from '../brokers/identity.js';
import { acquireDataDirLock, type DataDirLock } from './dataDirLock.js';
import { TOPOLOGY_RECORD_FILE, readTopologyRecord, writeTopologyRecord, type RecordedStage, type TopologyRecord } from './dataDirRecord.js';
import { stageBacklogs, type StageBacklog } from './stageBacklog.js';
import type { StageEntry } from './topology.js';

/** Name of a topology data dir's lock file: the pid of the process that runs the topology on it. */
export const TOPOLOGY_LOCK_FILE = 'topology.lock';

/**
 * What `start` does on a data dir whose last run did not stop quiet (killed, or stopped with
 * messages in flight) when those messages are not on this start's broker (the in-memory
 * broker, another broker or scope, a broker that lost them): `refuse` (the default) throws
 * DataDirError with what was lost; `discard-in-flight` starts anyway, without them, and says
 * so in a warning.
 */
export type UncleanPolicy = 'refuse' | 'discard-in-flight';

/** How a start found its data dir (`RunningTopology.recovery`). */
export interface TopologyRecovery {
  /**
   * `new`: no record and no stage stores; `quiet`: the last run stopped with nothing in
   * flight; `resumed`: it did not, and this run goes on with what it left on the same
   * durable broker scope; `discarded-in-flight`: it did not, its messages in flight are not
   * on this broker, and `onUnclean: 'discard-in-flight'` started without them.
   */
  readonly previous: 'new' | 'quiet' | 'resumed' | 'discarded-in-flight';
  /** `resumed`: messages the broker held, not acked, for the stages at start. */
  readonly backlog?: number;
  /** `discarded-in-flight`: what was lost (the refusal's reason). */
  readonly lost?: string;
}

/** Options of {@link TopologyDataDir.open}. */
export interface TopologyDataDirOptions {
  readonly dataDir: string;
  /** `Topology.name`. */
  readonly topology: string;
  readonly stages: readonly StageEntry[];
  /** This start's broker (its `identity` is recorded; `subscriptionBacklog` tells a durable one). */
  readonly broker: Broker;
  readonly onUnclean: UncleanPolicy;
  /** Warnings: a stale lock taken over, messages discarded. */
  readonly logger: Logger;
}

/** Backlogs are read at most this often while resuming (ms). */
const BACKLOG_POLL_MS = 100;

/**
 * One run of a topology on its data dir: the lock (`topology.lock`), the record
 * (`topology.json`, see TopologyRecord) and what the start decided about the last run:
 *
 * | last run | this start's broker | start |
 * |---|---|---|
 * | none, or stopped quiet | any | goes on |
 * | not quiet | the same durable scope (Redis Streams, Pulsar), holding every stage subscription | resumes: the broker delivers what was not acked, applied marks skip what was applied, outboxes publish what they hold; quiescence first waits until every stage subscription's backlog is 0 |
 * | not quiet | the in-memory broker, another broker or scope, or one that lost a subscription | refuses (DataDirError: what was lost, how to go on), or with `discard-in-flight` goes on without it and warns |
 *
 * The record says `running` from the end of `start` until a stop with nothing in flight:
 * every message this process sent to a consumed namespace settled and, when resuming, the
 * last run's backlog drained.
 */
export class TopologyDataDir {
  readonly #options: TopologyDataDirOptions;
  readonly #lock: DataDirLock;
  readonly #stages: RecordedStage[];
  readonly #identity: BrokerIdentity;
  readonly #runs: number;
  /** Whether quiescence waits for the last run's backlog: `resume` (a vanished subscription is data lost), `discard` (one not there yet is waited for). */
  readonly #drain: 'resume' | 'discard' | undefined;
  /** The stages of the last run that this one has too: those whose backlog it drains. */
  readonly #carried: readonly StageEntry[];
  #drained: boolean;
  #open: StageBacklog[] = [];
  #lastPoll = -Infinity;

  private constructor(options: TopologyDataDirOptions, lock: DataDirLock, record: TopologyRecord | undefined, identity: BrokerIdentity, readonly recovery: TopologyRecovery, drain: 'resume' | 'discard' | undefined) {
    this.#options = options;
    this.#lock = lock;
    this.#stages = options.stages.map(recordedStage);
    this.#identity = identity;
    this.#runs = (record?.runs ?? 0) + 1;
    this.#drain = drain;
    this.#drained = drain === undefined;
    this.#carried = carriedStages(options.stages, record);
  }

  /**
   * Takes the data dir's lock (a lock left by a killed process is taken over, with a
   * warning), reads its record, checks the topology's name against it, and
   * decides how to treat the last run (see the class). Writes nothing but the lock file, and
   * a `quiet` record into a new data dir.
   * @throws DataDirError when another live process (or another start in this one) runs on
   *   the data dir, when it holds another topology, when its record is
   *   damaged, or when the last run did not stop quiet and what it had in flight is not on
   *   this broker (with `onUnclean: 'refuse'`); BrokerDisconnectedError when the broker does
   *   not answer
   */
  static async open(options: TopologyDataDirOptions): Promise<TopologyDataDir> {
    const { dataDir, logger } = options;
    const lock = acquireDataDirLock(dataDir, {
      file: TOPOLOGY_LOCK_FILE,
      inUse: (pid, file) =>
        `data dir ${dataDir} is in use by process ${pid} (a topology runs on it): stop that run first, or give another dataDir. If no such process runs, remove ${file}.`,
      onStale: (pid, file) => logger.warn({ dataDir, pid, lockFile: file }, `data dir ${dataDir}: taking over the lock of process ${pid}, which no longer runs (killed?)`),
    });
    try {
      const record = readTopologyRecord(dataDir);
      if (record) checkTopology(options, record);
      const identity = options.broker.identity ?? { kind: options.broker.kind };
      if (!record && !existsSync(join(dataDir, 'stages'))) {
        // Empty stores are quiet: a first start that fails before it runs (a broker that does
        // not answer) leaves a data dir the next start takes as it is, not as one written
        // before records.
        const dir = new TopologyDataDir(options, lock, record, identity, { previous: 'new' }, undefined);
        await writeTopologyRecord(dataDir, dir.#record('quiet', 0));
        return dir;
      }
      if (record?.state === 'quiet') return new TopologyDataDir(options, lock, record, identity, { previous: 'quiet' }, undefined);
      const found = await lastRunInFlight(options, record, identity);
      if ('backlog' in found) return new TopologyDataDir(options, lock, record, identity, { previous: 'resumed', backlog: found.backlog }, 'resume');
      if (options.onUnclean !== 'discard-in-flight') throw new DataDirError(`${found.lost}. ${found.how}`);
      logger.warn({ dataDir, broker: identity }, `${found.lost}: starting anyway without them (onUnclean: 'discard-in-flight'); the stores keep every message applied before`);
      return new TopologyDataDir(options, lock, record, identity, { previous: 'discarded-in-flight', lost: found.lost }, found.sameScope ? 'discard' : undefined);
    } catch (err) {
      lock.release();
      throw err;
    }
  }

  /** Records the run: state `running`, this start's broker and stages. @throws the file system's errors */
  async markRunning(): Promise<void> {
    await this.#write('running');
  }

  /**
   * True once nothing the last run left on the broker waits to be applied: always when this
   * run does not resume; when it does, once every stage subscription's backlog was read as 0
   * (each message acked, so applied and committed). Reads the backlogs at most every 100 ms,
   * unless `now`.
   * @throws BrokerDataLostError when a subscription the resumed run needs vanished from the
   *   broker (what it held is lost); the broker's errors
   */
  async backlogDrained(now = false): Promise<boolean> {
    if (this.#drained) return true;
    const t = performance.now();
    if (!now && t - this.#lastPoll < BACKLOG_POLL_MS) return false;
    this.#lastPoll = t;
    const backlogs = await stageBacklogs(this.#options.broker, this.#carried);
    const vanished = this.#drain === 'resume' ? backlogs.find((b) => b.messages === undefined) : undefined;
    if (vanished) throw new BrokerDataLostError(vanished.topic, vanished.subscription, 'it vanished while this run resumed what the last run left on it');
    this.#open = backlogs.filter((b) => b.messages !== 0);
    this.#drained = this.#open.length === 0;
    return this.#drained;
  }

  /** What the last run left and this one has not applied yet, e.g. `clicks/3 count: 12` (empty when drained). */
  describeBacklog(): string {
    return this.#drained ? '' : this.#open.map((b) => `${b.topic} ${b.subscription}: ${b.messages ?? 'not subscribed yet'}`).join(', ');
  }

  /**
   * Records a stop and releases the lock: `quiet` when `settled` (every message this process
   * sent to a consumed namespace settled, after every stage stopped) and the last run's
   * backlog drained (read once more if it was not yet), else `running`.
   * @returns whether the stop was recorded quiet
   * @throws the file system's errors (the lock is released anyway)
   */
  async markStopped(settled: boolean): Promise<boolean> {
    try {
      const quiet = settled && (await this.backlogDrained(true).catch(() => false));
      await this.#write(quiet ? 'quiet' : 'running');
      return quiet;
    } finally {
      this.#lock.release();
    }
  }

  /** Releases the lock without writing (a start that failed). Idempotent. */
  release(): void {
    this.#lock.release();
  }

  async #write(state: TopologyRecord['state']): Promise<void> {
    await writeTopologyRecord(this.#options.dataDir, this.#record(state, this.#runs));
  }

  #record(state: TopologyRecord['state'], runs: number): TopologyRecord {
    return { format: 1, topology: this.#options.topology, stages: this.#stages, broker: this.#identity, state, pid: process.pid, runs, updatedAt: new Date().toISOString() };
  }
}

/** The stages of `stages` that the last run (its record) had too: a stage added since has no subscription yet. */
function carriedStages(stages: readonly StageEntry[], record: TopologyRecord | undefined): StageEntry[] {
  return stages.filter((s) => record?.stages.some((r) => r.stage === s.name));
}

function recordedStage(s: StageEntry): RecordedStage {
  return { stage: s.name, namespace: s.def.input.name, partitions: s.def.input.partitioner.partitions, partitioner: s.def.input.partitioner.describe() };
}

/**
 * Refuses a data dir written by another topology, or whose record gives a stage of this one
 * another partition count or partitioner. (Each stage store checks its own shape,
 * `checkStageShape`, before any actor runs; the record's check comes first so that a start
 * that also changed a stage's column families is refused for the partitioning, not for a
 * family its stores were opened without.)
 * @throws DataDirError naming both topologies, or the stage and both partitionings
 */
function checkTopology(options: TopologyDataDirOptions, record: TopologyRecord): void {
  if (record.topology !== options.topology) {
    throw new DataDirError(`data dir ${options.dataDir} holds topology ${record.topology}, not ${options.topology}: give a fresh dataDir (its ${TOPOLOGY_RECORD_FILE} names the topology)`);
  }
  for (const s of options.stages) {
    const was = record.stages.find((r) => r.stage === s.name);
    const now = recordedStage(s);
    if (was && (was.partitions !== now.partitions || was.partitioner !== now.partitioner)) {
      throw new DataDirError(
        `data dir ${options.dataDir}: stage ${s.name} was run with ${was.partitions} partitions (${was.partitioner}), not ${now.partitions} (${now.partitioner}): ` +
          'its stores hold keys placed by that partitioning; use a new data dir (re-partitioning is not supported)',
      );
    }
  }
}

/** What the last, unclean run left in flight: resumable on this broker (`backlog`), or lost (why, and how to go on). */
type InFlight = { readonly backlog: number } | { readonly lost: string; readonly how: string; readonly sameScope: boolean };

const HOW_TO_GO_ON =
  "To go on without them, start with onUnclean: 'discard-in-flight' (the stores keep every message applied before; those in flight are never applied, so results miss them); " +
  'to have them, send the input again into a fresh data dir.';

async function lastRunInFlight(options: TopologyDataDirOptions, record: TopologyRecord | undefined, identity: BrokerIdentity): Promise<InFlight> {
  const { dataDir, topology, broker } = options;
  const inFlight = `the messages in flight then (sent to ${options.stages.map((s) => `${s.def.input.name} for stage ${s.name}`).join(', ')} and not yet applied)`;
  if (!record) {
    return {
      lost: `data dir ${dataDir} holds stage stores but no ${TOPOLOGY_RECORD_FILE} (written before data dir records): whether its last run stopped with messages in flight, and on which broker, is unknown, so ${inFlight} may be lost`,
      how: HOW_TO_GO_ON,
      sameScope: false,
    };
  }
  const last = `the last run of topology ${topology} on data dir ${dataDir} (pid ${record.pid}, recorded ${record.updatedAt}) did not stop quiet (killed, or stopped with messages in flight) on ${describeBroker(record.broker)}`;
  if (record.broker.kind === 'memory') {
    return { lost: `${last}: ${inFlight} were lost with that process`, how: `${HOW_TO_GO_ON} On a durable broker (Redis Streams, Pulsar) a killed run resumes instead.`, sameScope: false };
  }
  if (!record.broker.scope) return { lost: `${last}, which did not say its scope: whether it still holds ${inFlight} is unknown`, how: HOW_TO_GO_ON, sameScope: false };
  if (!sameScope(record.broker, identity) || !broker.subscriptionBacklog) {
    return {
      lost: `${last}: ${inFlight} are on that broker scope, and this start is on ${describeBroker(identity)}`,
      how: `Connect to the recorded scope to resume (connectBroker(readTopologyRecord(dataDir).broker)). ${HOW_TO_GO_ON}`,
      sameScope: false,
    };
  }
  const backlogs = await stageBacklogs(broker, carriedStages(options.stages, record));
  const missing = backlogs.filter((b) => b.messages === undefined);
  if (missing.length > 0) {
    const names = missing.slice(0, 3).map((b) => `${b.subscription} on ${b.topic}`).join(', ');
    return {
      lost: `${last}, and that broker no longer holds ${missing.length} of the ${backlogs.length} stage subscriptions (${names}${missing.length > 3 ? ', ...' : ''}): ${inFlight} on them are lost (the broker lost its data, or the run was killed before it subscribed)`,
      how: HOW_TO_GO_ON,
      sameScope: true,
    };
  }
  return { backlog: backlogs.reduce((n, b) => n + (b.messages ?? 0), 0) };
}

function describeBroker(identity: BrokerIdentity): string {
  if (identity.kind === 'memory') return 'the in-memory broker';
  return [identity.kind, identity.url, identity.scope && `scope ${JSON.stringify(identity.scope)}`].filter(Boolean).join(' ');
}

/** Same kind, address (trailing slashes aside) and scope. */
function sameScope(a: BrokerIdentity, b: BrokerIdentity): boolean {
  const url = (u: string | undefined) => u?.replace(/\/+$/, '');
  return a.kind === b.kind && url(a.url) === url(b.url) && a.scope === b.scope;
}
