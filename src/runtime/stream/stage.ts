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
 * RocksDB write batch with the applied marks and the outbox rows (a typed view of the
 * batch's `IndexedWriteBatch`: only declared families are accepted). `ctx.reads` sees them at
 * once. No range deletes: RocksDB 7.8 cannot index them in a read-your-writes batch; delete
 * the keys one by one (iterate the range, delete each key).
 * @throws InvalidArgumentError for an undeclared family or a value that is not a Uint8Array;
 *   StoreBusyError while a read of the batch is in flight (await each read before writing)
 */
export interface StageWrites<C extends string> {
  put(cf: C, key: Key, value: Uint8Array): void;
  /** Folds `operand` into the value with the family's merge operator (declared with the family). */
  merge(cf: C, key: Key, operand: Uint8Array): void;
  delete(cf: C, key: Key): void;
}

/**
 * Reads of the stage's own column families. In a batch's handlers (`ctx.reads`) they are
 * read-your-writes, like Kafka Streams' and Flink's keyed state: the batch's writes so far
 * (the messages before this one, and this one's own) on top of what is committed, merges
 * resolved with the family's merge operator (RocksDB's WriteBatchWithIndex:
 * `IndexedWriteBatch`). An `iterate` sees the batch as it was at its first step, whatever is
 * written while it runs. In the `query` hook they read one snapshot: what was committed when
 * the request arrived.
 */
export interface StageReads<C extends string> {
  get(cf: C, key: Key): Promise<Buffer | undefined>;
  iterate(cf: C, options?: IterateOptions): AsyncGenerator<[Buffer, Buffer]>;
  /**
   * A consistent view of what is committed, for several reads (`iterate(cf, { snapshot })`;
   * in a batch, the batch's writes show on top of it); release it with `snapshot.release()`.
   */
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
   * effect at its receivers). Checked here, where the handler can still be refused: the
   * codec's `check` (the guard the receiver's decode applies), the key function, and the
   * encoded size against the broker's `maxPayloadBytes`.
   * @throws InvalidArgumentError when the codec's check refuses `value`; PayloadTooLargeError
   *   when it encodes to more than the broker's `maxPayloadBytes` (bytes); whatever the codec or
   *   key function throws. By default `onError` dead-letters the input message for these.
   */
  emit<K extends keyof O & string>(output: K, value: MessageOf<O[K]>): void;
  /**
   * Rejects the message `onMessage` runs for, alone: what its handler wrote and emitted, before
   * or after this call, is taken back (the batch's write-batch save point), the message goes
   * to the dead-letter topic with `reason`, and the rest of the batch commits. The handler
   * should return after it. The first reason of a message counts.
   * @throws InvalidArgumentError in `onBatch` (a batch fails as a whole: throw) or for an empty reason
   */
  deadLetter(reason: string): void;
}

/**
 * A partitioned, stateful stream stage (Kafka Streams' processor with its state store;
 * Flink's keyed process function): consumes every partition of `input`, one actor per
 * partition, each owning a RocksDB store with the declared `columnFamilies`.
 *
 * Per batch of delivered messages: messages already applied are skipped (a redelivery; one
 * dead-lettered before is dead-lettered again with its reason), undecodable ones and those of
 * a fenced-off producer incarnation are dead-lettered with the reason, `onMessage` runs for
 * each new message in order, each inside a save point of the batch (`ctx.deadLetter`, or a
 * throw that `onError` sends to the dead-letter topic, takes back that message's effects
 * alone), then `onBatch` once with the messages kept; their writes, the applied marks (dead
 * letters included) and the emitted messages (outbox rows) commit in one write batch, the
 * outbox is published, then each message is acked or dead-lettered with its reason. Handlers
 * read the batch's writes (`StageReads`), so a read-then-write handler sees an earlier
 * version of its key in the same batch.
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
  /**
   * Adds one message's effects; `ctx.deadLetter(reason)` rejects the message alone. A throw is
   * decided by `onError`: dead-letter the message alone, or fail the batch (nothing is
   * committed or acked, the partition restarts and the broker delivers the batch again).
   */
  readonly onMessage?: (ctx: StageContext<O, C>, value: I, message: BrokerMessage) => void | Promise<void>;
  /**
   * What a throw from `onMessage` does to its message (after Kafka Streams'
   * ProcessingExceptionHandler, KIP-1033, and Akka's supervision deciders): `'dead-letter'`
   * takes back that message's writes and emits and sends it to the dead-letter topic with the
   * reason `onMessage threw <name> (<code>): <message>`; `'fail'` fails the batch. Default
   * (`defaultMessageErrorDecision`): `'dead-letter'` for a ShardflowError of bad input
   * (InvalidArgumentError, e.g. a namespace key function refusing a value in `emit`;
   * InvalidUrlError, e.g. `hostOf` on a URL without a host; UndecodableMessageError;
   * PayloadTooLargeError), unless the stage context's own API threw it (an undeclared column
   * family, an unknown output: the handler's bug); `'fail'` for any other error. A throw from
   * `onError` fails the batch.
   */
  readonly onError?: (err: unknown, value: I, message: BrokerMessage) => 'dead-letter' | 'fail';
  /**
   * Adds the effects of the whole batch (after every `onMessage`; `values` leaves out the
   * dead-lettered messages), e.g. one aggregate message per batch. A throw fails the batch.
   */
  readonly onBatch?: (ctx: StageContext<O, C>, values: readonly I[]) => void | Promise<void>;
  /**
   * Answers `RunningTopology.ask(stage, partition, request)` from the partition's store. It
   * runs beside the partition's batches and its other queries (up to 64 at once; one more
   * waits, and holds the partition's next message, until it is answered), and its reads see
   * one snapshot: the store as committed when the request arrived. So it must not share
   * mutable state with the handlers or other queries without care. A throw (or a rejection)
   * is the asker's error, as thrown: the partition keeps running (a query changes nothing)
   * and the ask is not tried again; the ask of a query the partition's stop outlasts (by more
   * than 1 s) is rejected with ActorStoppedError and tried again on the next incarnation or
   * owner (the hook runs on, its reads failing with StoreClosedError, its answer dropped). In a cluster, a request
   * may reach it twice (docs/cluster.md, "Asking partitions across the cluster").
   */
  readonly query?: (reads: StageReads<C>, request: Q, partition: PartitionId) => R | Promise<R>;
  /**
   * How the stage's supervisor handles a partition's failures. Default: restart with backoff
   * 10 ms .. 1 s (factor 2, jitter 0.2; a broker outage backs off to 1 s), at most 100 restarts in 10 s per partition, then escalate.
   */
  readonly supervision?: SupervisorStrategy;
  /** Most messages per batch (default 256) and longest wait for a batch to fill in ms (default 5). */
  readonly batching?: { readonly maxCount?: number; readonly maxDelayMs?: number };
  /**
   * Unacked messages per partition consumer: the backpressure bound from the store back to the
   * broker. Default 1000 (Pulsar's WebSocket proxy takes at most 1000; a `PulsarBroker` lowers
   * a larger value to 1000).
   */
  readonly receiverQueueSize?: number;
  /**
   * Tries of one message whose handling keeps failing its batch (a throw `onError` decides
   * `'fail'`; store, broker, fencing and injected faults do not count) before the message is
   * dead-lettered with its last error as the reason, so one poison message cannot stop its
   * partition for good. After a batch fails, the partition restarts (see `supervision`) and
   * applies the redelivered messages one at a time until each has succeeded or failed this
   * many times alone (after Pulsar's `DeadLetterPolicy.maxRedeliverCount`). Default 10
   * (`DEFAULT_MAX_ATTEMPTS`); `Infinity`: never give up (the partition's restart intensity
   * then decides, and past it the topology stops with the error).
   */
  readonly maxAttempts?: number;
}
