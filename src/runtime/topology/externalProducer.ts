import type { Broker, Producer } from '../brokers/broker.js';
import { producerId, type ProducerId } from '../ids.js';
import { topicName, type Topic } from '../topics.js';
import type { FlowCounters } from '../stream/flowCounters.js';
import type { SentStream } from '../stream/flowReport.js';
import type { NamespaceDef } from '../stream/namespace.js';
import { epochSequence, nextProducerEpoch } from '../stream/producerEpoch.js';

/** Sends values into one namespace from outside the topology (an ingest, a test), exactly once in effect. */
export interface TopologyProducer<T> {
  /** The producer's name on the broker (consumers' applied marks are keyed by it). */
  readonly name: ProducerId;
  /** This incarnation's epoch (1, 2, ... per start under one data dir): see producerEpoch.ts. */
  readonly epoch: number;
  /**
   * Sends `value` to the partition of its key. Resolves when the broker has it. Await each
   * send (or keep one send per topic in flight) to keep their order. A failed send uses up
   * its sequence (the broker may have it): sending the value again is a new message.
   * @throws InvalidArgumentError when the namespace's codec refuses `value` (`Codec.check`:
   *   nothing is sent); the key function's and broker's errors
   */
  send(value: T): Promise<void>;
  /**
   * What this incarnation sent, per topic: its name, the topic (`<namespace>/<p>`) and the
   * sequence after the highest one whose send resolved (epoch-packed), as
   * `waitStreamsQuiet`'s and `ClusterClient.quiescence`'s `external` streams take them. A send
   * that failed is not counted (the broker may not have it): quiescence waits for what was sent.
   */
  sent(): SentStream[];
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
}

/**
 * Opens an external producer: takes the next epoch of `name` under `dataDir` (so a producer
 * started again, in a new process on the same data dir, is a new incarnation whose messages
 * are new to every consumer, never skipped as redeliveries), and sends with epoch-packed
 * sequences, per topic 0, 1, 2, ...
 * @throws InvalidArgumentError for a bad name; DataDirError for a damaged epoch file
 */
export async function openExternalProducer<T>(options: ExternalProducerOptions<T>): Promise<TopologyProducer<T>> {
  const { broker, namespace, counters } = options;
  const epoch = await nextProducerEpoch(options.dataDir, options.name);
  const name = producerId(options.name);
  const producers = new Map<number, Promise<Producer>>();
  const next = new Map<number, number>();
  /** Per topic name: the sequence after the highest one whose send resolved. */
  const acked = new Map<string, number>();
  const sentUpTo = (t: Topic, seq: number) => {
    const k = topicName(t);
    if ((acked.get(k) ?? -1) < seq + 1) acked.set(k, seq + 1);
  };
  const producerFor = (p: number, t: ReturnType<NamespaceDef<T>['topicOf']>): Promise<Producer> => {
    let got = producers.get(p);
    if (!got) {
      got = broker.producer(t, { producer: name });
      producers.set(p, got);
      got.catch(() => producers.delete(p));
    }
    return got;
  };
  return {
    name,
    epoch,
    async send(value) {
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
    sent() {
      return [...acked].map(([topic, next]) => ({ producer: name, topic, next }));
    },
    async close() {
      const all = [...producers.values()];
      producers.clear();
      await Promise.all(all.map(async (p) => (await p).close()));
    },
  };
}
