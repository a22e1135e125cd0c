import type { Observable } from 'rxjs';
import type { ProducerId, Sequence } from '../ids.js';
import type { Topic } from '../topics.js';
import type { BrokerIdentity } from './identity.js';

/**
 * The broker interface that the in-memory, Redis Streams and Pulsar brokers implement.
 *
 * Brokers move opaque payloads (msgpack bytes made by a `Codec`); they know topics,
 * subscriptions, acks and redelivery, never message types. Every message carries the
 * `(producer, sequence)` pair that consumers use for exactly-once effects: a consumer
 * stores the highest applied sequence per producer in the same RocksDB write batch as the
 * effects, then acks, and skips a redelivered message at or below that mark.
 *
 * Delivery is at-least-once. Per topic, messages of one producer are delivered in the order
 * sent, except that a nacked message comes back after its delay.
 *
 * Malformed entries (written by a foreign or broken producer: none of our fields, a missing
 * field, a sequence that is not a decimal integer, a payload over the broker's
 * `maxPayloadBytes`) never block the others: the consumer that reads one moves it alone to
 * the subscription's dead-letter topic with the reason (`DeadLetter.malformed`), acks it,
 * reports it on `Consumer.malformed$` and delivers the rest of its batch.
 *
 * Data loss: when the broker no longer has a live subscription's data (Redis NOGROUP, a
 * deleted Pulsar topic or subscription), the consumer fails `messages$` and `receive` with
 * `BrokerDataLostError` instead of retrying.
 */
export interface Broker {
  /** `memory`, `redis` or `pulsar`. */
  readonly kind: string;
  /**
   * Where this client's messages live: kind, address and scope (key prefix or tenant; see
   * identity.ts). A topology's data dir records it, so that a run killed with messages in
   * flight resumes only on the broker scope that still holds them. Optional so that wrappers
   * may leave it out; the in-memory, Redis Streams and Pulsar brokers have it.
   */
  readonly identity?: BrokerIdentity;
  /**
   * The largest payload `Producer.send` accepts, in bytes (the broker's `maxPayloadBytes`,
   * default 5 MiB): a stage checks what it emits against it, so that a message too large for
   * the broker fails its handler (dead-lettered with the reason) instead of committing an
   * outbox row no send will take. Optional so that wrappers may leave it out: absent, emits
   * are not checked and the send refuses.
   */
  readonly maxPayloadBytes?: number;
  /** A producer on `topic`. @throws BrokerClosedError after `close()`. */
  producer(topic: Topic, options: ProducerOptions): Promise<Producer>;
  /**
   * Joins (or creates) the named subscription on `topic`. A subscription starts at the
   * earliest retained message the first time it is created.
   * @throws InvalidArgumentError when a second consumer joins an exclusive subscription.
   */
  subscribe(topic: Topic, options: SubscribeOptions): Promise<Consumer>;
  /** Messages moved to the dead-letter topic of `subscription` on `topic`, oldest first. */
  deadLetters(topic: Topic, subscription: string): Promise<DeadLetter[]>;
  /**
   * Durable brokers: the messages of `subscription` on `topic` not acked yet (delivered and
   * pending, or not delivered yet), as the broker counts them; `undefined` when the broker
   * holds no such subscription (never created, or its data was lost). A process that
   * resumes an earlier one's work waits for every backlog to reach 0 before it counts its
   * own messages (see docs/ARCHITECTURE.md, "Crash and restart"). Absent on brokers whose
   * messages do not outlive the process (the in-memory one).
   * @throws BrokerDisconnectedError when the broker does not answer
   */
  subscriptionBacklog?(topic: Topic, subscription: string): Promise<number | undefined>;
  /** Closes every producer and consumer of this client; safe to call twice. */
  close(): Promise<void>;
}

/** Options of `Broker.producer`. */
export interface ProducerOptions {
  /** Stable producer name; the consumer's exactly-once marks are keyed by it. */
  readonly producer: ProducerId;
}

/** Sends payloads to one topic. */
export interface Producer {
  readonly topic: Topic;
  readonly producer: ProducerId;
  /**
   * Sends one payload. `sequence` defaults to the producer's next number (0, 1, ...);
   * callers that replay an outbox pass the sequence they stored. Resolves when the broker
   * has the message durably (per the broker's own guarantee).
   * @throws BrokerClosedError, BrokerDisconnectedError; PayloadTooLargeError (a subclass of
   *   InvalidArgumentError, with `bytes` and `limit`) when the payload is longer than the
   *   broker's `maxPayloadBytes` (default 5 MiB): nothing is sent.
   */
  send(payload: Uint8Array, options?: SendOptions): Promise<void>;
  /** Resolves when all sent messages are persisted. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

/** Options of `Producer.send`. */
export interface SendOptions {
  readonly sequence?: Sequence;
  /** Routing key for key_shared subscriptions. */
  readonly key?: string;
}

/**
 * Subscription types, as in Pulsar:
 * - exclusive: one consumer; a second `subscribe` fails.
 * - failover: many consumers, one active; when it leaves, its unacked messages go to the next.
 * - shared: many consumers, messages spread among them; unacked messages of a consumer that
 *   leaves go to the others.
 * - key_shared: shared, but all messages with one key go to the same consumer.
 */
export type SubscriptionType = 'exclusive' | 'failover' | 'shared' | 'key_shared';

/** Options of `Broker.subscribe`. */
export interface SubscribeOptions {
  readonly subscription: string;
  readonly type: SubscriptionType;
  /**
   * Most messages delivered to this consumer and not yet acked (backpressure: the broker
   * stops delivering until the consumer acks). Default 1000.
   */
  readonly receiverQueueSize?: number;
  /** Delay before a nacked message is delivered again, in ms. Default 1000. */
  readonly nackRedeliveryDelayMs?: number;
  /**
   * After this many redeliveries a nacked message goes to the dead-letter topic with its
   * reason instead. Default: unlimited (a nacked message is never dead-lettered; `deadLetter`
   * and malformed entries still are).
   */
  readonly maxRedeliveries?: number;
  /**
   * Failover: an integer in 0 .. 2^31 - 1; the consumer of the highest priority is the active
   * one. A partition's next owner passes its lease epoch, so that the broker hands the
   * subscription to it at once even while an older owner's connection stays open (a process
   * paused past its lease: found by a new user, a SIGSTOPped worker's Pulsar consumer kept the
   * subscription and starved its partition's new owner for as long as it stayed stopped).
   * Pulsar: `priorityLevel` 2^31 - 1 - priority (a lower level is a higher priority there; for a
   * non-partitioned topic the broker takes the consumers of the best level); Redis Streams and
   * memory: not used (the failover lock lapses with its holder's liveness key; one process).
   * Default: none (Pulsar level 0 for every consumer: the first connected stays active).
   */
  readonly priority?: number;
}

/** The highest `SubscribeOptions.priority` (Pulsar's `priorityLevel` is a Java int >= 0). */
export const MAX_SUBSCRIBE_PRIORITY = 2 ** 31 - 1;

/** One delivered message. */
export interface BrokerMessage {
  /** Broker-specific id, opaque to callers. */
  readonly id: string;
  readonly topic: Topic;
  readonly payload: Uint8Array;
  readonly producer: ProducerId;
  readonly sequence: Sequence;
  readonly key?: string;
  /** 0 on first delivery. */
  readonly redeliveryCount: number;
  /** Broker time of publish, ms since the epoch. */
  readonly publishTime: number;
}

/** A message that was given up on, with why. */
export interface DeadLetter {
  /**
   * The message. For a malformed entry, what could be read: the payload bytes (empty when
   * absent), the producer text (`?` when absent or empty) and the sequence (0 when absent or
   * unreadable); the reason says which.
   */
  readonly message: BrokerMessage;
  readonly reason: string;
  /** True when the entry never became a message (see "Malformed entries" on `Broker`). */
  readonly malformed?: boolean;
}

/**
 * One consumer of a subscription: push (`messages$`) or pull (`receive`), not both at once.
 */
export interface Consumer {
  /**
   * Push consumption: emits messages as the broker delivers them, at most
   * `receiverQueueSize` unacked at a time. One subscriber at a time; completes on `close()`.
   */
  readonly messages$: Observable<BrokerMessage>;
  /**
   * Pull consumption: resolves with 1 to `max` messages as soon as at least one is there,
   * or with `[]` after `timeoutMs` (default: wait indefinitely).
   */
  receive(max: number, timeoutMs?: number): Promise<BrokerMessage[]>;
  /** Acknowledges; the message will not be delivered again to this subscription. */
  ack(message: BrokerMessage): Promise<void>;
  /**
   * Negative ack: deliver again after `nackRedeliveryDelayMs`, or move it to the dead-letter
   * topic with `reason` once `maxRedeliveries` is exceeded.
   */
  nack(message: BrokerMessage, reason?: string): Promise<void>;
  /** Moves the message to the dead-letter topic now (e.g. it does not decode) and acks it. */
  deadLetter(message: BrokerMessage, reason: string): Promise<void>;
  /**
   * Entries this consumer found malformed and moved to the dead-letter topic (already acked),
   * each with its reason, as it happens; a new subscriber first gets the last 100 (an entry
   * may be met before the owner could subscribe). Completes on `close()`. Optional so that wrappers may leave it out; every broker's consumer and the
   * interceptors have it. The same entries are also logged as process warnings
   * (`SF_MALFORMED_ENTRY`, first ten and every 1000th).
   */
  readonly malformed$?: Observable<DeadLetter>;
  /** Leaves the subscription; unacked messages go to other consumers. Safe twice. */
  close(): Promise<void>;
}
