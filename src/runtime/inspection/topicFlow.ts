import type { Observable } from 'rxjs';
import type { Broker, BrokerMessage, Consumer, DeadLetter, Producer, ProducerOptions, SendOptions, SubscribeOptions } from '../brokers/broker.js';
import { topicName, type Topic } from '../topics.js';
import type { TopicFlow, TopicFlowSource } from './flowSource.js';

/** Mutable counts of one topic. */
interface Counts {
  readonly namespace: string;
  readonly partition: string;
  sent: number;
  settled: number;
}

/**
 * Messages sent and settled per topic, counted by wrapping a broker ({@link TopicFlowCounters.wrap}):
 * the per-partition view that the web index's per-namespace `FlowCounters` cannot give, read by
 * the inspection endpoint as `shardflow_broker_topic_lag_messages`.
 *
 * - sent: a `Producer.send` resolved (the broker has the message);
 * - settled: a `Consumer.ack` or `Consumer.deadLetter` resolved, or a `nack` of a message whose
 *   `redeliveryCount` already reached the subscription's `maxRedeliveries` (the broker moves it
 *   to the dead-letter topic).
 *
 * sent - settled is the topic's lag in messages, summed over its subscriptions (one per topic in
 * the web index). A consumer may ack a message before the producer's `send` promise resolves,
 * and a stale ack after a consumer handover is counted although the broker ignores it, so the
 * difference can briefly go below 0; readers clamp it.
 */
export class TopicFlowCounters implements TopicFlowSource {
  readonly #topics = new Map<string, Counts>();

  /** Every topic seen so far, with its counts at this instant (copies). */
  *topics(): Iterable<TopicFlow> {
    for (const c of this.#topics.values()) yield { namespace: c.namespace, partition: c.partition, sent: c.sent, settled: c.settled };
  }

  /**
   * A broker that behaves exactly like `broker` (same errors, same delivery) and counts into
   * these counters. Closing the wrapper closes `broker`.
   */
  wrap(broker: Broker): Broker {
    const counts = (topic: Topic): Counts => this.#counts(topic);
    return {
      kind: broker.kind,
      ...(broker.maxPayloadBytes !== undefined ? { maxPayloadBytes: broker.maxPayloadBytes } : {}),
      async producer(topic: Topic, options: ProducerOptions): Promise<Producer> {
        return countingProducer(await broker.producer(topic, options), counts(topic));
      },
      async subscribe(topic: Topic, options: SubscribeOptions): Promise<Consumer> {
        return countingConsumer(await broker.subscribe(topic, options), counts(topic), options.maxRedeliveries);
      },
      deadLetters: (topic: Topic, subscription: string): Promise<DeadLetter[]> => broker.deadLetters(topic, subscription),
      close: (): Promise<void> => broker.close(),
    };
  }

  #counts(topic: Topic): Counts {
    const name = topicName(topic);
    let c = this.#topics.get(name);
    if (c === undefined) this.#topics.set(name, (c = { namespace: topic.namespace, partition: String(topic.partition), sent: 0, settled: 0 }));
    return c;
  }
}

function countingProducer(producer: Producer, counts: Counts): Producer {
  return {
    topic: producer.topic,
    producer: producer.producer,
    // Plain `.then`, not an async wrapper: one promise per message fewer on the hot path.
    send: (payload: Uint8Array, options?: SendOptions): Promise<void> =>
      producer.send(payload, options).then(() => {
        counts.sent++;
      }),
    flush: () => producer.flush(),
    close: () => producer.close(),
  };
}

function countingConsumer(consumer: Consumer, counts: Counts, maxRedeliveries: number | undefined): Consumer {
  return {
    get messages$(): Observable<BrokerMessage> {
      return consumer.messages$;
    },
    // Malformed entries were never sent by our producers, so they count nothing; passed through.
    ...(consumer.malformed$ !== undefined ? { malformed$: consumer.malformed$ } : {}),
    receive: (max: number, timeoutMs?: number) => consumer.receive(max, timeoutMs),
    ack: (message: BrokerMessage): Promise<void> =>
      consumer.ack(message).then(() => {
        counts.settled++;
      }),
    async nack(message: BrokerMessage, reason?: string): Promise<void> {
      await consumer.nack(message, reason);
      if (maxRedeliveries !== undefined && message.redeliveryCount >= maxRedeliveries) counts.settled++;
    },
    async deadLetter(message: BrokerMessage, reason: string): Promise<void> {
      await consumer.deadLetter(message, reason);
      counts.settled++;
    },
    close: () => consumer.close(),
  };
}
