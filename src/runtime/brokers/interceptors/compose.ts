import type { Observable } from 'rxjs';
import { map } from 'rxjs';
import type { BrokerMessage, Consumer, Producer } from '../broker.js';

/**
 * Interceptors wrap a producer or consumer of any broker (after undici's `compose`, where
 * each interceptor wraps `dispatch`): what is written once here works for memory, Redis and
 * Pulsar alike. A payload transformation comes as a pair: the producer side encodes, the
 * consumer side decodes, so both ends must use the same pairs in mirrored order:
 *
 * ```
 * app -> batching.producer -> compression.producer -> broker
 * app <- batching.consumer <- compression.consumer <- broker
 * ```
 */
export interface Interceptor {
  readonly producer: (next: Producer) => Producer;
  readonly consumer: (next: Consumer) => Consumer;
}

/** `producer` wrapped by `interceptors`, the first one outermost (closest to the app). */
export function composeProducer(producer: Producer, ...interceptors: Interceptor[]): Producer {
  return interceptors.reduceRight((p, i) => i.producer(p), producer);
}

/** `consumer` wrapped by `interceptors`, the first one outermost (closest to the app). */
export function composeConsumer(consumer: Consumer, ...interceptors: Interceptor[]): Consumer {
  return interceptors.reduceRight((c, i) => i.consumer(c), consumer);
}

/**
 * A consumer whose messages are the inner ones with `decode` applied to the payload (1:1).
 * Acks, nacks and dead letters go to the inner message (same id), so a dead letter keeps the
 * bytes as they were on the wire.
 */
export function mapPayloads(inner: Consumer, decode: (payload: Uint8Array) => Uint8Array): Consumer {
  /** Inner messages by id, while delivered and not settled. */
  const originals = new Map<string, BrokerMessage>();
  const wrap = (m: BrokerMessage): BrokerMessage => {
    originals.set(m.id, m);
    return { ...m, payload: decode(m.payload) };
  };
  const original = (m: BrokerMessage): BrokerMessage => {
    const o = originals.get(m.id) ?? m;
    originals.delete(m.id);
    return o;
  };
  const messages$: Observable<BrokerMessage> = inner.messages$.pipe(map(wrap));
  return {
    messages$,
    receive: async (max, timeoutMs) => (await inner.receive(max, timeoutMs)).map(wrap),
    ack: (m) => inner.ack(original(m)),
    nack: (m, reason) => inner.nack(original(m), reason),
    deadLetter: (m, reason) => inner.deadLetter(original(m), reason),
    close: async () => {
      originals.clear();
      await inner.close();
    },
  };
}
