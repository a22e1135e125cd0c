import type { BrokerMessage } from '../brokers/broker.js';
import type { PartitionId } from '../ids.js';
import type { SupervisorStrategy } from '../supervision/strategy.js';
import type { ColumnFamilyOptions, IterateOptions, Key, Snapshot } from '../../storage/index.js';
import type { NamespaceDef } from './namespace.js';

/** Output namespaces of a stage, by the name its handlers emit to. */
export type StageOutputs = Readonly<Record<string, NamespaceDef<any>>>;

/** The message type of a namespace. */
export type MessageOf<N> = N extends NamespaceDef<infer T> ? T : never;

/**
 * The effects of one batch on the stage's own column families `C`, all committed in one
 * RocksDB write batch with the applied marks and the outbox rows (a typed view of
 * `WriteBatch`: only declared families are accepted).
 */
export interface StageWrites<C extends string> {
  put(cf: C, key: Key, value: Uint8Array): void;
  /** Folds `operand` into the value with the family's merge operator (declared with the family). */
  merge(cf: C, key: Key, operand: Uint8Array): void;
  delete(cf: C, key: Key): void;
  /** Removes the keys in [start, end) (not for families with `memtableInsertHint`). */
  deleteRange(cf: C, start: Key, end: Key): void;
}

/** Reads of the stage's own column families (what is committed; the batch's writes are not visible). */
export interface StageReads<C extends string> {
  get(cf: C, key: Key): Promise<Buffer | undefined>;
  iterate(cf: C, options?: IterateOptions): AsyncGenerator<[Buffer, Buffer]>;
  /** A consistent view for several reads; release it with `snapshot.release()`. */
  snapshot(): Snapshot;
}

/** What a stage's handlers get for one batch. */
export interface StageContext<O extends StageOutputs, C extends string> {
  /** The partition this batch belongs to. */
  readonly partition: PartitionId;
  /** Effects on the stage's column families, committed with the batch. */
  readonly writes: StageWrites<C>;
  /** Reads of the stage's column families. */
  readonly reads: StageReads<C>;
  /**
   * Sends `value` to output namespace `output`, routed by that namespace's key. The message
   * is written to the outbox with the batch and published after the commit (exactly once in
   * effect at its receivers). @throws whatever the codec or key function throws
   */
  emit<K extends keyof O & string>(output: K, value: MessageOf<O[K]>): void;
}

/**
 * A partitioned, stateful stream stage (Kafka Streams' processor with its state store;
 * Flink's keyed process function): consumes every partition of `input`, one actor per
 * partition, each owning a RocksDB store with the declared `columnFamilies`.
 *
 * Per batch of delivered messages: messages already applied are skipped (a redelivery),
 * undecodable ones and those of a fenced-off producer incarnation are dead-lettered with the
 * reason, `onMessage` runs for each new message in order, then `onBatch` once with all of
 * them; their writes, the applied marks and the emitted messages (outbox rows) commit in one
 * write batch, the outbox is published, then the batch is acked.
 *
 * Type parameters: `I` input messages, `O` output namespaces, `C` column family names, `Q`/`R`
 * request and answer of the `query` hook.
 */
export interface StageDef<I, O extends StageOutputs, C extends string, Q, R> {
  /** The namespace consumed; its partition count is the stage's. */
  readonly input: NamespaceDef<I>;
  /** Namespaces `emit` may send to, by name. */
  readonly outputs?: O;
  /**
   * The stage's own column families with their options (merge operators from
   * `mergeOperators`, compaction filters from `compactionFilters`). Names may not start
   * with `sf.` (the framework's).
   */
  readonly columnFamilies?: { readonly [K in C]: ColumnFamilyOptions };
  /** Adds one message's effects. A throw fails the batch: nothing is committed or acked, the partition restarts and the broker redelivers. */
  readonly onMessage?: (ctx: StageContext<O, C>, value: I, message: BrokerMessage) => void | Promise<void>;
  /** Adds the effects of the whole batch (after every `onMessage`), e.g. one aggregate message per batch. */
  readonly onBatch?: (ctx: StageContext<O, C>, values: readonly I[]) => void | Promise<void>;
  /** Answers `RunningTopology.ask(stage, partition, request)` from the partition's store, between batches. */
  readonly query?: (reads: StageReads<C>, request: Q, partition: PartitionId) => R | Promise<R>;
  /**
   * How the stage's supervisor handles a partition's failures. Default: restart with backoff
   * 10 ms .. 1 s (factor 2, jitter 0.2), at most 100 restarts in 10 s per partition, then escalate.
   */
  readonly supervision?: SupervisorStrategy;
  /** Most messages per batch (default 256) and longest wait for a batch to fill in ms (default 5). */
  readonly batching?: { readonly maxCount?: number; readonly maxDelayMs?: number };
  /** Unacked messages per partition consumer: the backpressure bound from the store back to the broker. Default 1000 (Pulsar takes at most 1000). */
  readonly receiverQueueSize?: number;
}
