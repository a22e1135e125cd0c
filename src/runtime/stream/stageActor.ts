import type { Subscription } from 'rxjs';
import { ActorStoppedError, InvalidArgumentError } from '../../errors.js';
import type { Cancel } from '../clock.js';
import { CHECKPOINTED_STORE_OPTIONS, Store, type SharedResources, type Snapshot } from '../../storage/index.js';
import type { Behavior } from '../actor/behavior.js';
import { detachReply } from '../actor/detachedReply.js';
import type { ActorContext } from '../actor/context.js';
import type { Broker, BrokerMessage, Consumer } from '../brokers/broker.js';
import { producerId, type PartitionId } from '../ids.js';
import { topic } from '../topics.js';
import { StreamMarks } from './appliedMarks.js';
import { applyStageBatch, type StageBatchReport } from './applyBatch.js';
import { feedDeliveries, type Deliveries } from './deliveries.js';
import type { FlowCounters } from './flowCounters.js';
import { readStreamFlow } from './flowReport.js';
import { StreamOutbox } from './outbox.js';
import { ownerPriority, recordOwnerEpoch, type PartitionFence } from './ownerEpoch.js';
import { DEFAULT_MAX_ATTEMPTS, PoisonMessages } from './poisonMessages.js';
import { QueryFailure } from './queryFailure.js';
import { stageColumnFamilies } from './reserved.js';
import { compactStageFamily, type StageCompaction } from './stageCompaction.js';
import type { StageDef, StageOutputs, StageReads } from './stage.js';
import { checkStageShape, type StageShape } from './stageShape.js';
import { isFenced, StageCheckpointer, type StageCheckpointing } from './stageCheckpoints.js';

/** What one stage partition actor is made with. */
export interface StagePartitionOptions {
  readonly stage: string;
  readonly partition: PartitionId;
  readonly def: StageDef<any, StageOutputs, string, any, any>;
  readonly broker: Broker;
  readonly counters: FlowCounters;
  /** Directory of this partition's RocksDB store (created if missing). */
  readonly storePath: string;
  /** Block cache and write buffers shared by the process's stores. */
  readonly resources?: SharedResources;
  /** Called after each committed batch (metrics, tests). */
  readonly onBatch?: (report: StageBatchReport) => void;
  /**
   * The cluster ownership this partition runs under (src/cluster): checked before the store
   * opens, recorded in the store (a newer recorded epoch refuses this owner), packed into
   * the outbox's sequences, and checked before each commit and publish. Absent outside a
   * cluster.
   */
  readonly fence?: PartitionFence;
  /** Checkpoints of this partition (a cluster worker's `checkpoints`): see {@link StagePartitionCheckpoints}. Absent: effects are published and acked at once. */
  readonly checkpoints?: StagePartitionCheckpoints;
}

/**
 * How one stage partition takes checkpoints (stageCheckpoints.ts): every
 * `checkpointing.intervalMs`, when half its receiver queue waits for one, and when it stops
 * for a hand-back; its outbox publishes and its acks wait for them.
 */
export interface StagePartitionCheckpoints {
  readonly checkpointing: StageCheckpointing;
  /**
   * Set by the host before the first start when the store was just restored from checkpoint
   * `sequence` (the first incarnation then has nothing to put until it writes); read once.
   */
  restoredSequence: number | undefined;
  /** Set before the actor is stopped for a planned hand-back: `stop()` takes a last checkpoint after the last batch settled. */
  handBack: boolean;
}

/** Asks the partition to checkpoint now (the periodic timer sends it). */
export interface StageCheckpointRequest {
  readonly type: 'checkpoint';
}

/** A question for the stage's `query` hook. */
export interface StageQuery {
  readonly type: 'query';
  readonly request: unknown;
}

/**
 * Asks the partition what its store committed to send and applied (`readStreamFlow` of its
 * meta family): quiet detection across processes (`ClusterClient.quiescence`).
 */
export interface StageFlowRequest {
  readonly type: 'flow';
}

/** Messages of a stage partition actor. */
export type StageMessage = Deliveries | StageQuery | StageCompaction | StageCheckpointRequest | StageFlowRequest;

interface StageState {
  readonly store: Store;
  readonly reads: StageReads<string>;
  marks: StreamMarks;
  outbox: StreamOutbox;
  consumer: Consumer;
  feed: Subscription;
  /** Next batch number expected from `consumer`. */
  expected: number;
  /** A batch failed after its marks or outbox sequences were taken: reopen before the next. */
  poisoned: boolean;
  /** With checkpoints: the held settles and the puts; and the periodic timer. */
  readonly checkpointer: StageCheckpointer | undefined;
  readonly cancelTimer: Cancel;
  /** Queries running beside the batches, each on its own snapshot (`runQuery`), with what gives its asker up. */
  readonly queries: Map<Promise<unknown>, (reason: Error) => void>;
}

/**
 * Queries of one partition that run at once beside its batches (each on its own snapshot);
 * one more is answered before the partition takes its next message (backpressure: the asks
 * wait in its mailbox). The cluster's ask responder takes up to this many of a unit's
 * requests at once too (`ASK_CONCURRENCY`).
 */
export const MAX_CONCURRENT_QUERIES = 64;

/**
 * How long a stopping partition lets its running queries finish before it closes its store,
 * in ms; the ask of a query still running then is rejected with ActorStoppedError (the query
 * itself runs on, its answer dropped), and the asker's retry reaches the next incarnation or
 * owner, or learns that the topology stopped.
 */
export const QUERY_STOP_GRACE_MS = 1000;

/**
 * Unacked messages per partition consumer when the stage does not say: 1000, the most every
 * broker takes (Pulsar's WebSocket proxy caps `receiverQueueSize` at 1000 and refuses more;
 * 1024 made every stage partition fail to start on Pulsar).
 */
const DEFAULT_RECEIVER_QUEUE = 1000;

/**
 * The actor of one partition of a stream stage: owns the partition's RocksDB store (the
 * stage's column families and the reserved `sf.*` ones, its shape checked at open), replays
 * the outbox a previous incarnation left, joins the failover subscription `<stage>` on
 * `<input>/<partition>` and applies each delivered batch with `applyStageBatch`.
 *
 * Order safety: a batch that never reached `applyStageBatch` (a failure, an injected fault)
 * leaves a gap in the consumer's batch numbers; a later batch must not be applied before it
 * (its mark would skip the lost one). So a batch from a closed consumer is dropped, and a gap
 * or an earlier failed batch makes the actor leave the subscription and join it again
 * (whatever the supervisor decided): the broker delivers every unacked message again, in
 * order. A restart does the same through `stop()` and `start()`.
 */
export function stagePartition(options: StagePartitionOptions): Behavior<StageMessage, StageState, unknown> {
  const { def, partition, stage, broker, counters, fence } = options;
  const namespace = def.input.name;
  // Kept across restarts: which messages failed their batches, and how often alone.
  const poison = new PoisonMessages(def.maxAttempts ?? DEFAULT_MAX_ATTEMPTS);
  // Once a handler read in a batch, later batches start read-your-writes (indexed) at once.
  const readsSeen = { value: false };

  const subscribe = async (ctx: ActorContext<StageMessage>): Promise<[Consumer, Subscription]> => {
    const consumer = await broker.subscribe(topic(namespace, partition), {
      subscription: stage,
      type: 'failover',
      receiverQueueSize: receiverQueue,
      // A newer owner's consumer is the active one at once (a paused older owner's stays open).
      ...ownerPriority(fence),
    });
    const feed = feedDeliveries(consumer, (d) => ctx.self.tell(d), ctx.fail, def.batching ?? {});
    return [consumer, feed];
  };
  const openOutbox = (store: Store) => {
    fence?.check();
    // With checkpoints, rows left in the store are published by the next checkpoint (the store may be ahead of every durable one).
    return StreamOutbox.open({ store, broker, owner: stage, producer: producerId(`${stage}@${partition}`), counters, epoch: fence?.epoch, publishOnOpen: !options.checkpoints });
  };
  const receiverQueue = def.receiverQueueSize ?? DEFAULT_RECEIVER_QUEUE;
  /** Held messages that trigger a checkpoint at once: the broker stops delivering at `receiverQueue` unacked. */
  const holdLimit = Math.max(1, Math.floor(receiverQueue / 2));
  /** Checkpoints now; a failure of the put is logged and the held acks wait for the next try; a fence or a failure after the put throws. */
  const checkpoint = async (state: StageState, ctx: ActorContext<StageMessage>): Promise<void> => {
    if (!state.checkpointer) return;
    try {
      await state.checkpointer.checkpoint(state.outbox, ctx.system.logger);
    } catch (err) {
      if (isFenced(err) || state.checkpointer.failedAfterPut) throw err;
      ctx.system.logger.warn({ path: ctx.path, err }, `checkpoint of ${stage}/${partition} failed; its acks and publishes wait for the next one`);
    }
  };

  /**
   * Runs the `query` hook beside the batches: its reads see the store as committed when the
   * query arrived (one snapshot for all of them, released when it returns). The hook's own
   * error answers the asker as a QueryFailure; an error after the incarnation ended (the
   * store closed under it) rejects the ask, which `askWithRetry` tries again.
   */
  const runQuery = (state: StageState, request: unknown, ctx: ActorContext<StageMessage>): Promise<unknown> => {
    const hook = def.query;
    if (!hook) return Promise.resolve(new QueryFailure(new InvalidArgumentError(`stage ${stage} has no query hook`)));
    const { store } = state;
    let snapshot: Snapshot;
    try {
      snapshot = store.snapshot();
    } catch (err) {
      return Promise.reject(err); // closed: the asker tries again
    }
    const reads: StageReads<string> = {
      get: (cf, key) => store.get(cf, key, { snapshot }),
      iterate: (cf, o) => store.iterate(cf, { ...o, snapshot: o?.snapshot ?? snapshot }),
      snapshot: () => store.snapshot(),
    };
    const answer = async (): Promise<unknown> => {
      try {
        return await hook(reads, request, partition);
      } catch (error) {
        if (ctx.signal.aborted || store.closed) throw error;
        return new QueryFailure(error);
      } finally {
        snapshot.release();
      }
    };
    let giveUp!: (reason: Error) => void;
    const abandoned = new Promise<never>((_, reject) => (giveUp = reject));
    const run = Promise.race([answer(), abandoned]).finally(() => state.queries.delete(run));
    state.queries.set(run, giveUp);
    return run;
  };

  /** Leaves the subscription and joins it again with fresh marks and outbox (see above). */
  const reopen = async (state: StageState, ctx: ActorContext<StageMessage>): Promise<void> => {
    state.feed.unsubscribe();
    await state.consumer.close();
    state.checkpointer?.dropHeld(); // that consumer's unacked messages come again
    await state.outbox.close();
    state.marks = new StreamMarks(state.store, stage);
    state.outbox = await openOutbox(state.store);
    [state.consumer, state.feed] = await subscribe(ctx);
    state.expected = 0;
    state.poisoned = false;
  };

  return {
    kind: stage,
    async start(ctx) {
      fence?.check();
      const store = await Store.open({
        path: options.storePath,
        columnFamilies: stageColumnFamilies(def.columnFamilies ?? {}),
        ...(options.resources ? { resources: options.resources } : {}),
        ...(options.checkpoints ? CHECKPOINTED_STORE_OPTIONS : {}),
      });
      let outbox: StreamOutbox | undefined;
      try {
        await checkStageShape(store, stageShape(stage, def, partition));
        if (fence) await recordOwnerEpoch(store, fence.epoch);
        outbox = await openOutbox(store);
        const [consumer, feed] = await subscribe(ctx);
        const reads: StageReads<string> = {
          get: (cf, key) => store.get(cf, key),
          iterate: (cf, o) => store.iterate(cf, o),
          snapshot: () => store.snapshot(),
        };
        const cp = options.checkpoints;
        let checkpointer: StageCheckpointer | undefined;
        let cancelTimer: Cancel = () => {};
        if (cp) {
          checkpointer = new StageCheckpointer(cp.checkpointing, stage, partition, store, fence, cp.restoredSequence);
          cp.restoredSequence = undefined;
          const tick = (): void => {
            cancelTimer = ctx.clock.setTimeout(() => {
              if (ctx.signal.aborted) return;
              ctx.self.tell({ type: 'checkpoint' }).catch(() => {}); // stopping: the hand-back takes the last one
              tick();
            }, cp.checkpointing.intervalMs);
          };
          tick();
        }
        return { store, reads, marks: new StreamMarks(store, stage), outbox, consumer, feed, expected: 0, poisoned: false, checkpointer, cancelTimer: () => cancelTimer(), queries: new Map() };
      } catch (err) {
        await outbox?.close();
        await store.close();
        throw err;
      }
    },
    async receive(state, message, ctx) {
      if (message.type === 'query') {
        // A query changes nothing: it runs beside the next batches (its error answers the
        // asker and leaves the partition running); past MAX_CONCURRENT_QUERIES the partition
        // waits for this one before its next message.
        const answer = runQuery(state, message.request, ctx);
        return state.queries.size > MAX_CONCURRENT_QUERIES ? answer : detachReply(answer);
      }
      if (message.type === 'flow') return readStreamFlow(state.store);
      if (message.type === 'compact') return compactStageFamily(state.store, stage, def, partition, message.columnFamily);
      if (message.type === 'checkpoint') {
        if (!state.poisoned) await checkpoint(state, ctx);
        return undefined;
      }
      if (message.consumer !== state.consumer) return undefined; // redelivered to the current consumer
      if (state.poisoned || message.batchNo !== state.expected) {
        await reopen(state, ctx);
        return undefined;
      }
      state.expected++;
      const batch = { partition, namespace, def, store: state.store, reads: state.reads, marks: state.marks, outbox: state.outbox, counters, fence, readsSeen, giveUp: (m: BrokerMessage) => poison.giveUp(m), ...(broker.maxPayloadBytes !== undefined ? { maxPayloadBytes: broker.maxPayloadBytes } : {}), ...(state.checkpointer ? { holdEffects: state.checkpointer.hold.bind(state.checkpointer) } : {}) };
      // After a failed batch, its messages are applied one at a time until each one succeeds
      // or fails `maxAttempts` times alone (then it is dead-lettered with its last error).
      const parts = poison.isolate(message.messages) ? message.messages.map((m) => [m]) : [message.messages];
      let report: StageBatchReport = { applied: 0, skipped: 0, deadLettered: 0, emitted: 0 };
      for (const part of parts) {
        try {
          const r = await applyStageBatch(batch, state.consumer, part);
          report = { applied: report.applied + r.applied, skipped: report.skipped + r.skipped, deadLettered: report.deadLettered + r.deadLettered, emitted: report.emitted + r.emitted };
        } catch (err) {
          state.poisoned = true;
          poison.failed(part, err);
          throw err;
        }
        if (parts.length > 1) poison.applied(part[0]!);
      }
      if (state.checkpointer && state.checkpointer.heldMessages >= holdLimit) await checkpoint(state, ctx);
      options.onBatch?.(report);
      return report;
    },
    async stop(state, ctx) {
      state.feed.unsubscribe();
      state.cancelTimer();
      if (options.checkpoints?.handBack && state.checkpointer && !state.poisoned) {
        // The last checkpoint of a planned hand-back, after the last batch settled and before the lease is released.
        try {
          // Whole (flushed), not a WAL tail: the next owner opens SST files, no chain of logs to replay.
          await state.checkpointer.checkpoint(state.outbox, ctx.system.logger, { whole: true });
        } catch (err) {
          ctx.system.logger.warn({ path: ctx.path, err }, `the hand-back checkpoint of ${stage}/${partition} failed: its next owner restores the one before and the broker redelivers what followed`);
        }
      }
      await state.consumer.close();
      await state.outbox.close();
      if (state.queries.size > 0) {
        let cancel: Cancel = () => {};
        const grace = new Promise<void>((resolve) => (cancel = ctx.clock.setTimeout(resolve, QUERY_STOP_GRACE_MS)));
        await Promise.race([Promise.allSettled([...state.queries.keys()]), grace]);
        cancel();
        // Their askers do not wait out their timeouts for answers that cannot come from here.
        for (const giveUp of state.queries.values()) giveUp(new ActorStoppedError(`partition ${stage}/${partition} stopped while a query ran (past the ${QUERY_STOP_GRACE_MS} ms a stop gives queries): ask again`));
      }
      await state.store.close();
    },
  };
}

/** The shape a stage partition's store is written as (see `checkStageShape`). */
export function stageShape(stage: string, def: StageDef<any, StageOutputs, string, any, any>, partition: PartitionId): StageShape {
  return { stage, namespace: def.input.name, partition, partitions: def.input.partitioner.partitions, partitioner: def.input.partitioner.describe() };
}
