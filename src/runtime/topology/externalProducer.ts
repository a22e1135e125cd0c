import { InvalidArgumentError, ProducerFailedError } from '../../errors.js';
import type { Broker, Producer } from '../brokers/broker.js';
import { producerId, sequence, type ProducerId } from '../ids.js';
import { topicName, type Topic } from '../topics.js';
import type { FlowCounters } from '../stream/flowCounters.js';
import type { SentStream } from '../stream/flowReport.js';
import type { NamespaceDef } from '../stream/namespace.js';
import { checkProducerName, epochSequence, nextProducerEpoch } from '../stream/producerEpoch.js';
import { offsetsProducerId } from '../stream/sourceOffsets.js';

/** Sends values into one namespace from outside the topology (an ingest, a test), exactly once in effect. */
export interface TopologyProducer<T> {
  /** The producer's name on the broker (consumers' applied marks are keyed by it). */
  readonly name: ProducerId;
  /** This incarnation's epoch (1, 2, ... per start under one data dir): see producerEpoch.ts; 0 for a producer with `offsets`. */
  readonly epoch: number;
  /** True when the caller gives each value's offset (`ExternalProducerOptions.offsets`). */
  readonly offsets: boolean;
  /**
   * Sends `value` to the partition of its key. Resolves when the broker has it. Await each
   * send (or keep one send per topic in flight) to keep their order. A failed send uses up
   * its sequence (the broker may have it): sending the value again is a new message.
   *
   * With `offsets`, `options.offset` is required: the value's position in the replayable
   * input, a safe integer above the previous send's offset (its sequence on the broker). Sends
   * to one topic go out one after the other in offset order; after a failed send the producer
   * refuses every later send (`ProducerFailedError`): the broker may lack that offset while a
   * later one would pass the partition's mark over it, so open a new producer and send again
   * from the lowest offset not known to be sent: every offset below it resolved (with sends
   * not awaited one by one, a higher offset may have resolved on another topic while a lower
   * one never went out), or from the start.
   * @throws InvalidArgumentError when the namespace's codec refuses `value` (`Codec.check`:
   *   nothing is sent), for a missing, repeated or decreasing offset with `offsets` and for an
   *   offset without it; ProducerFailedError after a failed send with `offsets`; the key
   *   function's and broker's errors
   */
  send(value: T, options?: { readonly offset?: number }): Promise<void>;
  /**
   * What this incarnation sent, per topic: its name, the topic (`<namespace>/<p>`) and the
   * sequence after the highest one whose send resolved (epoch-packed), as
   * `waitStreamsQuiet`'s and `ClusterClient.quiescence`'s `external` streams take them. A send
   * that failed is not counted (the broker may not have it): quiescence waits for what was sent.
   */
  sent(): SentStream[];
  /**
   * With `offsets`: the offset to send the input again from after a crash of this ingest,
   * every lower offset given to `send` having resolved (its first unresolved or failed send;
   * one above the last when all resolved; undefined before the first send). Persist it as
   * often as you like beside your input's position, as Kafka Connect commits a source's
   * offsets once its records are acknowledged. Without `offsets`, undefined.
   */
  resumeOffset(): number | undefined;
  /** Closes the broker producers. */
  close(): Promise<void>;
}

/** Options of {@link openExternalProducer}. */
export interface ExternalProducerOptions<T> {
  readonly broker: Broker;
  /** Where the producer's durable epoch counter lives (`<dataDir>/producers/<name>.epoch`). */
  readonly dataDir: string;
  readonly namespace: NamespaceDef<T>;
  /** Stable name: 1 to 128 letters, digits, `.`, `_`, `-`. */
  readonly name: string;
  /** Counts sends for quiescence (the topology's counters when opened through it). */
  readonly counters?: FlowCounters;
  /**
   * The caller gives each value's offset in a replayable input (a line of a file, a source
   * partition's offset), and the offsets are the sequences on the broker, under the producer
   * id `<name>#offsets` and without an epoch (no `<dataDir>/producers` file). Sending the input
   * again after any crash (of the ingest, of the topology, of both), from the start or from an
   * offset below which every send resolved, is then exactly once: a partition skips a value whose offset is at or below
   * its mark for that producer as applied, and applies the rest. As Flink's replayable sources
   * rewound to the offsets of a checkpoint, with the marks in the partitions' stores in the
   * offsets' place. The contract: an offset always names the same value (the input does not
   * change under a name), and one process sends under a name at a time. Without `offsets` a
   * producer opened again is a new epoch and everything it sends is new (guide section 7).
   */
  readonly offsets?: boolean;
}

/**
 * Opens an external producer: takes the next epoch of `name` under `dataDir` (so a producer
 * started again, in a new process on the same data dir, is a new incarnation whose messages
 * are new to every consumer, never skipped as redeliveries), and sends with epoch-packed
 * sequences, per topic 0, 1, 2, ... With `offsets`, no epoch: the caller's offsets are the
 * sequences, and the input sent again is skipped where applied (`ExternalProducerOptions.offsets`).
 * @throws InvalidArgumentError for a bad name; DataDirError for a damaged epoch file
 */
export async function openExternalProducer<T>(options: ExternalProducerOptions<T>): Promise<TopologyProducer<T>> {
  const { broker, namespace, counters } = options;
  if (options.offsets === true) {
    checkProducerName(options.name);
    return offsetsProducer(options, offsetsProducerId(options.name));
  }
  const epoch = await nextProducerEpoch(options.dataDir, options.name);
  const name = producerId(options.name);
  const producers = new Map<number, Promise<Producer>>();
  const next = new Map<number, number>();
  const { sentUpTo, sent } = sentStreams(name);
  const producerFor = brokerProducers(broker, name, producers);
  return {
    name,
    epoch,
    offsets: false,
    async send(value, sendOptions) {
      if (sendOptions?.offset !== undefined) throw new InvalidArgumentError(`producer ${name} numbers its sends itself: open it with offsets: true to give offsets`);
      namespace.codec.check?.(value);
      const t = namespace.topicOf(value);
      const payload = namespace.codec.encode(value);
      const n = next.get(t.partition) ?? 0;
      next.set(t.partition, n + 1);
      const seq = epochSequence(epoch, n);
      const producer = await producerFor(t.partition, t);
      if (!counters) {
        await producer.send(payload, { sequence: seq });
        sentUpTo(t, seq);
        return;
      }
      // In flight from before the send until settled; a failed send is taken back (no
      // closure per message: this is the hot path of every producer).
      const key = { producer: name, topic: topicName(t), sequence: seq };
      const counted = counters.onSent(namespace.name, key);
      try {
        await producer.send(payload, { sequence: seq });
        sentUpTo(t, seq);
      } catch (err) {
        if (counted) counters.onSendFailed(namespace.name, key);
        throw err;
      }
    },
    sent,
    resumeOffset: () => undefined,
    async close() {
      const all = [...producers.values()];
      producers.clear();
      await Promise.all(all.map(async (p) => (await p).close()));
    },
  };
}

/**
 * `openExternalProducer` with `offsets`: the caller's offsets are the sequences, sends to one
 * topic are chained in offset order, and the first failed send fails every later one.
 */
function offsetsProducer<T>(options: ExternalProducerOptions<T>, name: ProducerId): TopologyProducer<T> {
  const { broker, namespace, counters } = options;
  const producers = new Map<number, Promise<Producer>>();
  const producerFor = brokerProducers(broker, name, producers);
  const { sentUpTo, sent } = sentStreams(name);
  /** Per partition: the last send's promise (the next waits for it), never rejected. */
  const tails = new Map<number, Promise<void>>();
  /**
   * Per partition: the offsets given to `send` and not resolved, in order. Its sends are
   * chained, so each resolves at the head of its queue, and a failed one stays there.
   */
  const unresolved = new Map<number, number[]>();
  let last = -1;
  let failed: { readonly offset: number; readonly error: unknown } | undefined;
  const refuse = (offset: number) =>
    new ProducerFailedError(
      `producer ${name}: offset ${offset} was not sent: the send of offset ${failed!.offset} failed (${failed!.error instanceof Error ? failed!.error.message : String(failed!.error)}), so it sends nothing more: ` +
        `the broker may lack that offset, and a later one applied would make its partition skip it when the input is sent again. ` +
        `Open a new producer and send again from the lowest offset not known to be sent (every offset below it resolved), or from the start`,
      { cause: failed!.error },
    );
  return {
    name,
    epoch: 0,
    offsets: true,
    async send(value, sendOptions) {
      const offset = sendOptions?.offset;
      if (failed) throw refuse(offset ?? NaN);
      if (offset === undefined || !Number.isSafeInteger(offset) || offset < 0) {
        const got = typeof offset === 'number' ? String(offset) : `${typeof offset} ${JSON.stringify(offset) ?? ''}`.trim();
        throw new InvalidArgumentError(`producer ${name} takes the offset of each value in its input: options.offset must be a non-negative safe integer, got ${got}`);
      }
      if (offset <= last) throw new InvalidArgumentError(`producer ${name}: offset ${offset} is not above the previous send's (${last}); offsets grow with every send`);
      namespace.codec.check?.(value);
      const t = namespace.topicOf(value);
      const payload = namespace.codec.encode(value);
      last = offset;
      let queue = unresolved.get(t.partition);
      if (!queue) unresolved.set(t.partition, (queue = []));
      queue.push(offset);
      const seq = sequence(offset);
      const key = { producer: name, topic: topicName(t), sequence: seq };
      const run = async () => {
        if (failed) throw refuse(offset);
        const counted = counters?.onSent(namespace.name, key) ?? false;
        try {
          await (await producerFor(t.partition, t)).send(payload, { sequence: seq });
        } catch (err) {
          if (counted) counters!.onSendFailed(namespace.name, key);
          failed ??= { offset, error: err };
          throw err;
        }
        sentUpTo(t, seq);
        queue.shift();
      };
      const done = (tails.get(t.partition) ?? Promise.resolve()).then(run);
      tails.set(t.partition, done.catch(() => undefined));
      return done;
    },
    sent,
    resumeOffset() {
      let lowest = last >= 0 ? last + 1 : undefined;
      for (const queue of unresolved.values()) if (queue.length > 0 && (lowest === undefined || queue[0]! < lowest)) lowest = queue[0]!;
      return lowest;
    },
    async close() {
      await Promise.all(tails.values());
      const all = [...producers.values()];
      producers.clear();
      await Promise.all(all.map(async (p) => (await p).close().catch(() => undefined)));
    },
  };
}

/**
 * A producer's broker producers, one per partition, opened on first use (a producer that
 * failed to open is forgotten, so the next send opens it again).
 */
function brokerProducers(broker: Broker, name: ProducerId, producers: Map<number, Promise<Producer>>): (p: number, t: Topic) => Promise<Producer> {
  return (p, t) => {
    let got = producers.get(p);
    if (!got) {
      got = broker.producer(t, { producer: name });
      producers.set(p, got);
      got.catch(() => producers.delete(p));
    }
    return got;
  };
}

/** `TopologyProducer.sent()` of producer `name`: per topic, the sequence after the highest whose send resolved. */
function sentStreams(name: ProducerId): { sentUpTo(t: Topic, seq: number): void; sent(): SentStream[] } {
  const acked = new Map<string, number>();
  return {
    sentUpTo(t, seq) {
      const k = topicName(t);
      if ((acked.get(k) ?? -1) < seq + 1) acked.set(k, seq + 1);
    },
    sent: () => [...acked].map(([topic, next]) => ({ producer: name, topic, next })),
  };
}
