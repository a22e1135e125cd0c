import { join } from 'node:path';
import { ActorStoppedError, JobStalledError, PayloadTooLargeError, terminalError } from '../../errors.js';
import { SharedResources, Store } from '../../storage/index.js';
import type { ChaosPolicy } from '../actor/chaosPolicy.js';
import { consoleLogger, type Logger } from '../actor/logger.js';
import type { ActorRef } from '../actor/ref.js';
import { ActorSystem } from '../actor/system.js';
import type { Broker, DeadLetter } from '../brokers/broker.js';
import { systemClock, type Clock } from '../clock.js';
import { partitionId, type PartitionId } from '../ids.js';
import { startInspectionServer, type InspectionServer } from '../inspection/server.js';
import { TopicFlowCounters } from '../inspection/topicFlow.js';
import type { TreeNode } from '../inspection.js';
import { SupervisorStrategy } from '../supervision/strategy.js';
import { topic } from '../topics.js';
import type { FlowCounters } from '../stream/flowCounters.js';
import type { NamespaceDef } from '../stream/namespace.js';
import { stagePartition, stageShape, type StageMessage } from '../stream/stageActor.js';
import { stageColumnFamilies } from '../stream/reserved.js';
import { checkStageShape } from '../stream/stageShape.js';
import { checkStageFamily, type StageCompactionReport } from '../stream/stageCompaction.js';
import { askStageQuery } from '../stream/queryFailure.js';
import { askWithRetry, type AskRetryOptions } from './askWithRetry.js';
import { openExternalProducer, type TopologyProducer } from './externalProducer.js';
import { ScopedFlowCounters } from './scopedFlowCounters.js';
import type { ColumnFamiliesOf, StageTypes, Topology } from './topology.js';
import { TopologyDataDir, type TopologyRecovery, type UncleanPolicy } from './topologyDataDir.js';
import { whenStagesStarted } from './stagesStarted.js';

/** Options of `Topology.start`. */
export interface TopologyStartOptions {
  /** Any broker (memory, Redis Streams, Pulsar); the caller keeps it and closes it after `stop()`. */
  readonly broker: Broker;
  /**
   * Directory of the stage stores (`stages/<stage>/p<i>`), producer epochs (`producers/`),
   * the record of its runs (`topology.json`) and its lock (`topology.lock`: one run at a
   * time); created if missing. See TopologyDataDir.
   */
  readonly dataDir: string;
  /**
   * When the last run on `dataDir` did not stop quiet and what it had in flight is not on
   * this broker (the in-memory broker, another broker or scope, lost broker data):
   * `'refuse'` (default: DataDirError saying what was lost) or `'discard-in-flight'` (start
   * without it, with a warning). On the same durable scope the run resumes either way.
   */
  readonly onUnclean?: UncleanPolicy;
  /** Fault injection (`ChaosPolicy.parse('0.05')`): fails stage `receive()` calls at that rate. Default off. */
  readonly chaos?: ChaosPolicy;
  readonly clock?: Clock;
  /** The actor system's logger (default: the console logger). */
  readonly logger?: Logger;
  /** Block cache and write buffers shared by all stage stores, in bytes. Default 16 MiB per partition, at least 64 MiB. */
  readonly memoryBudgetBytes?: number;
  /** Serve the operator console and Prometheus `/metrics` (docs/console.md) on this port (0: any free port). */
  readonly inspect?: { readonly port?: number; readonly host?: string };
}

/** A started topology. `S` knows each stage's query types. */
export interface RunningTopology<S extends Record<string, StageTypes>> {
  readonly system: ActorSystem;
  /** Messages sent and settled per namespace (the quiescence check and `/metrics` read them). */
  readonly counters: FlowCounters;
  /** Per-topic counts of the broker's traffic. */
  readonly topicFlow: TopicFlowCounters;
  /** The console, when `inspect` was given. */
  readonly inspection: InspectionServer | undefined;
  /** How the start found the data dir: new, after a quiet stop, resumed, or in-flight messages discarded. */
  readonly recovery: TopologyRecovery;
  /**
   * The partition that routing key `key` goes to in `target` (a namespace, or a stage: its
   * input namespace): FNV-1a of the key's UTF-8 bytes modulo the partition count, the
   * partition whose store holds that key's effects (`ask(stage, partitionOfKey(stage, key), ...)`).
   * @throws RangeError for a stage this topology does not have
   */
  partitionOfKey(target: (keyof S & string) | NamespaceDef<any>, key: string): PartitionId;
  /**
   * An external producer into `namespace` under `name`, with the next durable epoch of that
   * name in this data dir (see `openExternalProducer`); its sends count for quiescence. With
   * `options.offsets` the caller gives each value's offset in a replayable input instead, and
   * sending the input again after a crash is exactly once (`ExternalProducerOptions.offsets`).
   * @throws InvalidArgumentError for a bad name; DataDirError for a damaged epoch file
   */
  producer<T>(namespace: NamespaceDef<T>, name: string, options?: { readonly offsets?: boolean }): Promise<TopologyProducer<T>>;
  /**
   * Asks partition `partition` of `stage` through its query hook (beside its batches, on a
   * snapshot of what was committed when the request arrived), with retries across restarts
   * and injected faults. An error the hook
   * throws is the answer: thrown here as it was, not tried again, the partition keeps running.
   * @throws RangeError for a partition outside the stage's; the hook's error; the last try's
   *   error after the retries
   */
  ask<N extends keyof S & string>(stage: N, partition: number, request: S[N]['request'], options?: AskRetryOptions): Promise<S[N]['answer']>;
  /**
   * `ask` of the partition that owns `key` in `stage`: the partition its input namespace
   * routes `key` to (`input.partitioner.forKey(key)`, FNV-1a of the key modulo the partition
   * count), so a query about one key reaches the store that holds it.
   * @param key a routing key, as the input namespace's `key` function returns it for a message
   * @throws RangeError for an unknown stage; the hook's error; the last try's error after the retries
   */
  askKey<N extends keyof S & string>(stage: N, key: string, request: S[N]['request'], options?: AskRetryOptions): Promise<S[N]['answer']>;
  /** `ask` of every partition of `stage`, answers in partition order. */
  askAll<N extends keyof S & string>(stage: N, request: S[N]['request'], options?: AskRetryOptions): Promise<Array<S[N]['answer']>>;
  /**
   * Compacts `columnFamily` of every partition of `stage` now (`compactStageFamily`: the whole
   * key space, each partition between two batches, with `ask`'s retries), so that the family's
   * compaction filter has run over every committed value: after `ttl(...)`, expired values are
   * gone. Answers per partition, in partition order, what the filter examined and dropped.
   * @throws InvalidArgumentError for a family the stage does not declare; RangeError for an
   *   unknown stage; the store's errors after the retries
   */
  compact<N extends keyof S & string>(stage: N, columnFamily: ColumnFamiliesOf<S[N]>, options?: AskRetryOptions): Promise<StageCompactionReport[]>;
  /**
   * Resolves when nothing is in flight: twice in a row, `pollMs` apart, every message sent to
   * a consumed namespace was settled and nothing moved in between (Mattern's four-counter
   * method, see FlowCounters); on a resumed data dir, only once the last run's backlog on the
   * broker drained as well (these counters do not know its messages). Bounded by default: a stage that never settles a message (a
   * handler that hangs, a partition its supervisor stopped) fails the wait instead of polling
   * forever.
   * @param options.pollMs ms between checks, default 20
   * @param options.timeoutMs ms to wait in all, default {@link DEFAULT_QUIESCENCE_TIMEOUT_MS}
   *   (5 minutes); `Infinity` waits as long as it takes
   * @throws ActorStoppedError when the topology stopped (a failure escalated to the root);
   *   JobStalledError when `timeoutMs` passed, with the messages in flight per namespace;
   *   BrokerDataLostError when a resumed run's subscription vanished from the broker
   */
  quiescence(options?: { readonly pollMs?: number; readonly timeoutMs?: number }): Promise<void>;
  /** Messages the stage dead-lettered (undecodable, fenced-off producer, malformed entries), over all its partitions, with their reasons. */
  deadLetters(stage: keyof S & string): Promise<DeadLetter[]>;
  /**
   * Stops every stage (stores closed, subscriptions left) and the console, records the stop
   * in the data dir (`quiet` when nothing was in flight, see TopologyDataDir) and releases
   * its lock. Idempotent (a second call returns the first call's promise). Bounded, as
   * Kafka Streams' `close(Duration)` is: a partition stops between batches, so a handler that
   * never returns keeps it from stopping; after `timeoutMs` the call gives up.
   * For a stop that records `quiet`, stop sending and wait for `quiescence()` first: what a
   * stop interrupts is in flight, and the next start on the data dir resumes or refuses it.
   * @param options.timeoutMs ms to wait for the stages to stop, default
   *   {@link DEFAULT_STOP_TIMEOUT_MS} (30 s); `Infinity` waits as long as it takes
   * @throws JobStalledError when `timeoutMs` passed, naming the actors still running: the
   *   data dir is not marked stopped and keeps its lock, so exit the process; the next start
   *   treats the run as killed (docs/guide.md, "Data dirs")
   */
  stop(options?: { readonly timeoutMs?: number }): Promise<void>;
}

/** How long `RunningTopology.stop()` waits for its stages when given no `timeoutMs`: 30 s, in ms. */
export const DEFAULT_STOP_TIMEOUT_MS = 30_000;

/** How long `RunningTopology.quiescence()` waits when given no `timeoutMs`: 5 minutes, in ms. */
export const DEFAULT_QUIESCENCE_TIMEOUT_MS = 300_000;

/**
 * Default supervision of a stage's partitions (see `StageDef.supervision`): restart with
 * backoff from 10 ms to 1 s (jitter 0.2; while the broker is unreachable the backoff grows
 * until the partition handles a message again, so a broker outage backs off to 1 s instead of
 * restarting every few ms: `RestartBook.record`), at most 100 restarts in 10 s, then escalate;
 * a PayloadTooLargeError escalates at once (a committed outbox row over the broker's
 * `maxPayloadBytes` stays first in its topic's queue, and no restart sends it).
 */
export const DEFAULT_STAGE_SUPERVISION = SupervisorStrategy.restartWithBackoff({ minMs: 10, maxMs: 1000, factor: 2, randomFactor: 0.2 }).withLimit(100, 10_000).on(PayloadTooLargeError, 'escalate');

/**
 * Starts `topology` on its data dir (`TopologyDataDir`: the lock, the record, resume or
 * refuse after an unclean run): one actor system; per stage, a supervisor `/<stage>` with
 * one actor per partition of its input (`stagePartition`), each owning its store under
 * `<dataDir>/stages/<stage>/p<i>`; the console when asked for. Resolves once every stage
 * partition has started (joined its subscription).
 * @throws DataDirError when the data dir is in use, holds another topology or stage shape,
 *   or its last run did not stop quiet and what it had in flight is not on this broker (see
 *   `onUnclean`); the stores' open errors (DataDirError for a store of another shape); the
 *   broker's errors; ActorStoppedError when a stage partition cannot start (its supervisor
 *   gave up: the failure as `cause`)
 */
export async function startTopology<S extends Record<string, StageTypes>>(topology: Topology<S>, options: TopologyStartOptions): Promise<RunningTopology<S>> {
  const clock = options.clock ?? systemClock;
  const consumed = topology.consumed();
  topology.namespaces();
  const counters = new ScopedFlowCounters(consumed);
  const topicFlow = new TopicFlowCounters();
  const broker = topicFlow.wrap(options.broker);
  const dataDir = await TopologyDataDir.open({
    dataDir: options.dataDir,
    topology: topology.name,
    stages: topology.stages,
    broker: options.broker,
    onUnclean: options.onUnclean ?? 'refuse',
    logger: options.logger ?? consoleLogger,
  });
  const partitions = topology.stages.reduce((n, s) => n + s.def.input.partitioner.partitions, 0);
  const resources = SharedResources.create({ memoryBudgetBytes: options.memoryBudgetBytes ?? Math.max(64, 16 * partitions) * 2 ** 20 });
  const system = ActorSystem.create({
    name: topology.name,
    clock,
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.chaos ? { chaos: options.chaos } : {}),
  });
  // Open each store once before any actor runs: a store of another shape (partition count,
  // partitioner, stage) or with another merge operator fails the start with its reason,
  // instead of restarting its partition until the supervisor gives up.
  try {
    for (const s of topology.stages) {
      for (let p = 0; p < s.def.input.partitioner.partitions; p++) {
        const store = await Store.open({ path: join(options.dataDir, 'stages', s.name, `p${p}`), columnFamilies: stageColumnFamilies(s.def.columnFamilies ?? {}), resources });
        try {
          await checkStageShape(store, stageShape(s.name, s.def, partitionId(p)));
        } finally {
          await store.close();
        }
      }
    }
  } catch (err) {
    await system.terminate();
    dataDir.release();
    throw err;
  }
  let terminated = false;
  let failure: { readonly error: unknown } | undefined;
  void system.whenTerminated.then((t) => {
    terminated = true;
    if (t.kind === 'failed') failure = { error: t.error };
  });
  // A topology that stopped because a failure escalated to the root says which one, with the
  // chain of causes (a restart intensity exceeded, then the failure that was repeated).
  const describe = (e: unknown): string => {
    if (!(e instanceof Error)) return String(e);
    return e.cause === undefined ? e.message : `${e.message}; last failure: ${describe(e.cause)}`;
  };
  const stopped = () =>
    terminalError(
      failure
        ? new ActorStoppedError(`topology ${topology.name} has stopped: a failure escalated past its stage's supervisor: ${describe(failure.error)}`, { cause: failure.error })
        : new ActorStoppedError(`topology ${topology.name} has stopped`),
    );
  const started = whenStagesStarted(system, topology.stages);
  started.catch(() => undefined); // awaited below, unless supervise throws first
  try {
    for (const s of topology.stages) {
      const n = s.def.input.partitioner.partitions;
      system.supervise(
        s.name,
        s.def.supervision ?? DEFAULT_STAGE_SUPERVISION,
        Array.from({ length: n }, (_, p) => ({
          name: `p${p}`,
          behavior: stagePartition({
            stage: s.name,
            partition: partitionId(p),
            def: s.def,
            broker,
            counters,
            storePath: join(options.dataDir, 'stages', s.name, `p${p}`),
            resources,
          }),
        })),
        // A partition past its restart intensity escalates to the stage's supervisor, which
        // escalates to the root: the topology stops and says why (quiescence() and ask() throw
        // ActorStoppedError with the failure), instead of restarting the whole stage forever.
        { supervision: SupervisorStrategy.escalate },
      );
    }
  } catch (err) {
    await system.terminate();
    dataDir.release();
    throw err;
  }
  let inspection: InspectionServer | undefined;
  try {
    inspection = options.inspect ? await startInspectionServer(system, { ...options.inspect, flow: counters, topicFlow }) : undefined;
    await started;
    await dataDir.markRunning(); // from here on, a kill may leave messages in flight
  } catch (err) {
    await system.terminate();
    await inspection?.close();
    dataDir.release();
    throw err;
  }

  const stageOf = (name: string) => {
    const s = topology.stages.find((e) => e.name === name);
    if (!s) throw new RangeError(`topology ${topology.name} has no stage ${JSON.stringify(name)}`);
    return s;
  };
  const refOf = (stage: string, partition: number) => (): ActorRef<StageMessage, unknown> => {
    if (terminated) throw stopped();
    const ref = system.lookup<StageMessage, unknown>(`/${stage}/p${partition}`);
    if (!ref) throw new ActorStoppedError(`/${stage}/p${partition} is not running`);
    return ref;
  };
  const ask = async (stage: string, partition: number, request: unknown, opts?: AskRetryOptions): Promise<any> => {
    partitionId(partition, stageOf(stage).def.input.partitioner.partitions);
    return askStageQuery(refOf(stage, partition), request, clock, opts);
  };
  const producers = new Set<TopologyProducer<any>>();
  let stopping: Promise<void> | undefined;

  return {
    system,
    counters,
    topicFlow,
    inspection,
    recovery: dataDir.recovery,
    partitionOfKey(target, key) {
      return (typeof target === 'string' ? stageOf(target).def.input : target).partitioner.forKey(key);
    },
    async producer(namespace, name, producerOptions) {
      if (terminated) throw stopped();
      const p = await openExternalProducer({ broker, dataDir: options.dataDir, namespace, name, counters, ...(producerOptions?.offsets === true ? { offsets: true } : {}) });
      producers.add(p);
      return p;
    },
    ask,
    askKey: async (stage, key, request, opts) => ask(stage, stageOf(stage).def.input.partitioner.forKey(key), request, opts),
    askAll: (stage, request, opts) =>
      Promise.all(Array.from({ length: stageOf(stage).def.input.partitioner.partitions }, (_, p) => ask(stage, p, request, opts))),
    async compact(stage, columnFamily, opts) {
      const s = stageOf(stage);
      checkStageFamily(stage, s.def, columnFamily);
      const message = { type: 'compact', columnFamily } as const;
      return Promise.all(Array.from({ length: s.def.input.partitioner.partitions }, (_, p) => askWithRetry(refOf(stage, p), message, clock, opts) as Promise<StageCompactionReport>));
    },
    async quiescence({ pollMs = 20, timeoutMs = DEFAULT_QUIESCENCE_TIMEOUT_MS } = {}) {
      const started = clock.now();
      const sleep = () => new Promise<void>((resolve) => clock.setTimeout(resolve, pollMs));
      for (;;) {
        await sleep();
        if (terminated) throw stopped();
        if (clock.now() - started > timeoutMs) {
          const waiting = [...counters.sent].map(([ns, n]) => `${ns}: ${n - (counters.settled.get(ns) ?? 0)}`).join(', ');
          const left = dataDir.describeBacklog();
          throw new JobStalledError(`topology ${topology.name} not quiet after ${timeoutMs} ms (messages in flight per namespace: ${waiting || 'none'}${left ? `; left by the last run, not applied yet: ${left}` : ''})`);
        }
        if (!counters.balanced() || !(await dataDir.backlogDrained())) continue;
        const epoch = counters.epoch();
        await sleep();
        if (counters.balanced() && counters.epoch() === epoch) return;
      }
    },
    async deadLetters(stage) {
      const s = stageOf(stage);
      const n = s.def.input.partitioner.partitions;
      const lists = await Promise.all(Array.from({ length: n }, (_, p) => options.broker.deadLetters(topic(s.def.input.name, partitionId(p)), s.name)));
      return lists.flat();
    },
    async stop(stopOptions) {
      stopping ??= (async () => {
        await Promise.allSettled([...producers].map((p) => p.close()));
        const timeoutMs = stopOptions?.timeoutMs ?? DEFAULT_STOP_TIMEOUT_MS;
        let timer: ReturnType<typeof setTimeout> | undefined;
        const gaveUp = Number.isFinite(timeoutMs)
          ? new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)))
          : undefined;
        const outcome = await (gaveUp ? Promise.race([system.terminate(), gaveUp]) : system.terminate());
        clearTimeout(timer);
        if (outcome === 'timeout') {
          await inspection?.close();
          const stuck = liveActors(system.tree()).filter((n) => n.children.length === 0).map((n) => `${n.path} (${n.status})`);
          throw new JobStalledError(
            `topology ${topology.name} did not stop within ${timeoutMs} ms: ${stuck.slice(0, 8).join(', ')}${stuck.length > 8 ? `, and ${stuck.length - 8} more` : ''} still running ` +
              '(a handler that never returns keeps its partition from stopping). The data dir is not marked stopped and keeps its lock: exit the process; the next start treats this run as killed.',
          );
        }
        await inspection?.close();
        await dataDir.markStopped(counters.balanced());
      })();
      return stopping;
    },
  };
}

/** The actors of `node`'s subtree not yet stopped, parents before children. */
function liveActors(node: TreeNode): TreeNode[] {
  const out: TreeNode[] = [];
  const walk = (n: TreeNode) => {
    if (n.status !== 'stopped' && n.status !== 'failed') out.push(n);
    for (const c of n.children) walk(c);
  };
  walk(node);
  return out;
}
