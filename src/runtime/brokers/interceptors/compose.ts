import { EMPTY, filter, map, merge, type Observable } from 'rxjs';
import type { BrokerMessage, Consumer, DeadLetter, Producer } from '../broker.js';
import { MalformedLog } from '../internal/malformed.js';

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
 * What an interceptor's consumer side does with a message it cannot decode: dead-letter the
 * inner message alone (reason `<what>: <error message>`), record it on `log`, and let the
 * others through. A dead letter that fails (broker unreachable) leaves the message unacked
 * on the inner consumer, so it comes back when that consumer closes or reconnects; the
 * failure is a process warning (`SF_MALFORMED_ENTRY`).
 * @returns a promise that settles when the dead letter is written (never rejects).
 */
export function rejectUndecodable(inner: Consumer, log: MalformedLog, what: string, m: BrokerMessage, err: unknown): Promise<void> {
  const reason = `${what}: ${(err as Error).message}`;
  return inner.deadLetter(m, reason).then(
    () => log.record({ message: m, reason }),
    (e: unknown) => {
      process.emitWarning(`${log.who}: could not dead-letter ${m.id} (${reason}): ${(e as Error).message}`, { code: 'SF_MALFORMED_ENTRY' });
    },
  );
}

/**
 * `Consumer.receive` through a transformation that may drop messages (dead-lettered ones):
 * receives again while the inner consumer delivered only dropped messages and `timeoutMs`
 * (ms; undefined = no limit) has time left, so `[]` still means "timed out".
 */
export async function receiveSkipping(
  inner: Consumer,
  max: number,
  timeoutMs: number | undefined,
  transform: (ms: BrokerMessage[]) => Promise<BrokerMessage[]>,
): Promise<BrokerMessage[]> {
  const end = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
  for (;;) {
    const left = end === undefined ? undefined : Math.max(0, end - Date.now());
    const got = await inner.receive(max, left);
    if (got.length === 0) return [];
    const out = await transform(got);
    if (out.length > 0 || (end !== undefined && Date.now() >= end)) return out;
  }
}

/** `inner.malformed$` (or nothing) merged with an interceptor's own. */
export function mergeMalformed(inner: Consumer, own: MalformedLog): Observable<DeadLetter> {
  return merge(inner.malformed$ ?? EMPTY, own.malformed$);
}

/**
 * A consumer whose messages are the inner ones with `decode` applied to the payload (1:1).
 * Acks, nacks and dead letters go to the inner message (same id), so a dead letter keeps the
 * bytes as they were on the wire. A message whose `decode` throws is dead-lettered alone
 * with reason `<what>: <error>` and reported on `malformed$` (see `rejectUndecodable`); the
 * others are delivered.
 */
export function mapPayloads(inner: Consumer, decode: (payload: Uint8Array) => Uint8Array, what = 'undecodable payload'): Consumer {
  /** Inner messages by id, while delivered and not settled. */
  const originals = new Map<string, BrokerMessage>();
  const log = new MalformedLog(`${what} check of a consumer`);
  /** The decoded message, or undefined after dead-lettering it (`pending` gets the promise). */
  const wrap = (m: BrokerMessage, pending?: Array<Promise<void>>): BrokerMessage | undefined => {
    let payload: Uint8Array;
    try {
      payload = decode(m.payload);
    } catch (err) {
      const p = rejectUndecodable(inner, log, what, m, err);
      pending?.push(p);
      return undefined;
    }
    originals.set(m.id, m);
    return { ...m, payload };
  };
  const original = (m: BrokerMessage): BrokerMessage => {
    const o = originals.get(m.id) ?? m;
    originals.delete(m.id);
    return o;
  };
  const messages$: Observable<BrokerMessage> = inner.messages$.pipe(
    map((m) => wrap(m)),
    filter((m): m is BrokerMessage => m !== undefined),
  );
  return {
    messages$,
    malformed$: mergeMalformed(inner, log),
    receive: (max, timeoutMs) =>
      receiveSkipping(inner, max, timeoutMs, async (ms) => {
        const pending: Array<Promise<void>> = [];
        const out = ms.flatMap((m) => wrap(m, pending) ?? []);
        await Promise.all(pending);
        return out;
      }),
    ack: (m) => inner.ack(original(m)),
    nack: (m, reason) => inner.nack(original(m), reason),
    deadLetter: (m, reason) => inner.deadLetter(original(m), reason),
    close: async () => {
      originals.clear();
      log.complete();
      await inner.close();
    },
  };
}
