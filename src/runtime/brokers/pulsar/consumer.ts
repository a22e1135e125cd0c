import { randomBytes } from 'node:crypto';
import type WebSocket from 'ws';
import type { Observable } from 'rxjs';
import { BrokerClosedError, BrokerDataLostError, BrokerDisconnectedError, InvalidArgumentError, PayloadTooLargeError } from '../../../errors.js';
import { producerId, sequence, type ProducerId } from '../../ids.js';
import { topicName, type Topic } from '../../topics.js';
import { MAX_SUBSCRIBE_PRIORITY, type BrokerMessage, type Consumer, type DeadLetter, type SubscriptionType } from '../broker.js';
import { Delivery } from '../internal/delivery.js';
import { entryProblem, MalformedLog, parseSequence } from '../internal/malformed.js';
import type { PulsarAdmin } from './admin.js';
import { fullName, INCARNATION, Props, topicPath, type PulsarTopicName } from './names.js';
import { closeSocket, type PulsarProducer } from './producer.js';
import { openSocket } from './socket.js';

/** Pulsar's names of our subscription types. */
const TYPES: Readonly<Record<SubscriptionType, string>> = Object.freeze({
  exclusive: 'Exclusive',
  failover: 'Failover',
  shared: 'Shared',
  key_shared: 'Key_Shared',
});

/** Options of a Pulsar WebSocket consumer. Times in ms. */
export interface PulsarConsumerConfig {
  readonly wsUrl: string;
  readonly target: PulsarTopicName;
  readonly deadLetterTarget: PulsarTopicName;
  readonly topic: Topic;
  readonly subscription: string;
  readonly type: SubscriptionType;
  /** 1..1000 (the WebSocket proxy caps it at 1000). */
  readonly receiverQueueSize: number;
  readonly nackRedeliveryDelayMs: number;
  /** -1 = unlimited. */
  readonly maxRedeliveries: number;
  /** `SubscribeOptions.priority`, when given. */
  readonly priority?: number;
  readonly connectTimeoutMs: number;
  /** A consumer that cannot reconnect for this long errors with BrokerDisconnectedError. */
  readonly reconnectTimeoutMs: number;
  /** The dead-letter producer of this subscription, opened on first use. */
  readonly deadLetters: () => Promise<PulsarProducer>;
  /** Messages with a longer payload are dead-lettered as malformed. */
  readonly maxPayloadBytes: number;
  /** For the subscription's incarnation mark (data-loss check). */
  readonly admin: PulsarAdmin;
  /** Period of the data-loss check, ms. */
  readonly dataLossCheckMs: number;
  readonly onClose: (c: PulsarConsumer) => void;
}

/** One message as the WebSocket consumer endpoint sends it. */
interface WsMessage {
  readonly messageId: string;
  readonly payload: string;
  readonly properties?: Record<string, string>;
  readonly publishTime?: string;
  readonly redeliveryCount?: number;
  readonly key?: string;
}

/**
 * A consumer over `/ws/v2/consumer/persistent/<tenant>/<ns>/<topic>/<subscription>`.
 *
 * Pulsar does the subscription work: the type (`subscriptionType`), the unacked bound (the
 * proxy stops pushing at `receiverQueueSize` unacked), nack delays
 * (`negativeAckRedeliveryDelay`), redelivery counts, and handing a closed consumer's unacked
 * messages to the others. New subscriptions start at the earliest message
 * (`subscriptionInitialPosition=Earliest`).
 *
 * Dead letters carry a reason, which Pulsar's own dead-letter policy cannot: a nack that
 * would exceed `maxRedeliveries`, and `deadLetter`, publish the message to the subscription's
 * DLQ topic with `sf-reason` (and origin id, redelivery count) and then ack it. The native
 * policy (`maxRedeliverCount` + `deadLetterTopic`, same topic) stays as a backstop for
 * redeliveries that never pass through `nack`.
 *
 * Redelivery counts: Pulsar counts redeliveries only on shared and key_shared
 * subscriptions (its single-active-consumer dispatchers report 0). On exclusive and failover
 * this consumer counts its own nacks per message id and reports the larger of the two; a
 * failover handover starts that count afresh on the new consumer.
 *
 * Disconnects: the consumer reconnects with backoff; messages in flight come again from
 * Pulsar (same ids; acks by id stay valid across sessions).
 *
 * Malformed messages (no `sf-producer` / `sf-sequence` property, a sequence that is not a
 * decimal integer, a payload over `maxPayloadBytes`) are not delivered: they go to the DLQ
 * topic with `sf-reason` and `sf-malformed=1` (their own properties kept), are acked, and are
 * reported on `malformed$`. If that fails they are nacked, so they come back and are tried
 * again.
 *
 * Data loss: when the topic or the subscription is deleted, the WebSocket proxy does not
 * close the socket: its client resubscribes, Pulsar recreates both, empty, and the consumer
 * would wait forever. So the subscription carries a property `sf-incarnation` (set by the
 * first consumer); every `dataLossCheckMs` the consumer reads it through the admin API, and
 * when it is gone (the subscription was recreated) fails `messages$` and `receive` with
 * `BrokerDataLostError`. An admin API that does not answer proves nothing: the check is
 * skipped then.
 */
export class PulsarConsumer implements Consumer {
  readonly #c: PulsarConsumerConfig;
  readonly #delivery: Delivery;
  #ws: WebSocket | undefined;
  #closed = false;
  /** Nacks per message id, for single-active-consumer types (see the class doc). */
  readonly #nacks = new Map<string, number>();
  #closing: Promise<void> | undefined;
  /** Waiters for a (re)connected socket. */
  #waiters: Array<{ resolve: (ws: WebSocket) => void; reject: (e: Error) => void }> = [];
  readonly #malformed: MalformedLog;
  /** Data-loss check timer (see the class doc). */
  #check: NodeJS.Timeout | undefined;
  #lost: BrokerDataLostError | undefined;

  private constructor(config: PulsarConsumerConfig) {
    this.#c = config;
    this.#delivery = new Delivery(config.receiverQueueSize);
    this.#malformed = new MalformedLog(`pulsar consumer of ${config.subscription} on ${topicName(config.topic)}`);
  }

  /**
   * Subscribes, then marks the subscription's incarnation (unless marked) and starts the
   * data-loss check. A Pulsar without subscription properties gets no check (a warning says so).
   * @throws InvalidArgumentError (exclusive taken, type mismatch), BrokerDisconnectedError.
   */
  static async open(config: PulsarConsumerConfig): Promise<PulsarConsumer> {
    const c = new PulsarConsumer(config);
    c.#attach(await c.#openReleased());
    try {
      await c.#mark();
      c.#check = setInterval(() => void c.#checkData(), config.dataLossCheckMs);
      c.#check.unref();
    } catch (err) {
      if (err instanceof BrokerDisconnectedError && !(err as { status?: number }).status) {
        await c.close();
        throw err;
      }
      process.emitWarning(`pulsar consumer of ${config.subscription} on ${topicName(config.topic)}: no data-loss check (${(err as Error).message})`);
    }
    return c;
  }

  get messages$(): Observable<BrokerMessage> {
    return this.#delivery.messages$;
  }

  get malformed$(): Observable<DeadLetter> {
    return this.#malformed.malformed$;
  }

  /** Sets the incarnation property unless the subscription has one. */
  async #mark(): Promise<void> {
    const { admin, target, subscription } = this.#c;
    const props = await admin.subscriptionProperties(target, subscription);
    if (props?.[INCARNATION]) return;
    await admin.setSubscriptionProperties(target, subscription, { ...props, [INCARNATION]: randomBytes(8).toString('hex') });
  }

  /** One data-loss check: the incarnation property gone means the subscription was recreated. */
  async #checkData(): Promise<void> {
    if (this.#closed || this.#lost) return;
    let props: Record<string, string> | undefined;
    try {
      props = await this.#c.admin.subscriptionProperties(this.#c.target, this.#c.subscription);
    } catch {
      return; // admin unreachable (e.g. Pulsar restarting): proves nothing
    }
    if (this.#closed || props?.[INCARNATION]) return;
    this.#lost = new BrokerDataLostError(
      topicName(this.#c.topic),
      this.#c.subscription,
      `pulsar ${props === undefined ? 'topic or subscription no longer exists' : 'subscription was recreated (its sf-incarnation property is gone)'} on ${fullName(this.#c.target)}; messages in flight are lost`,
    );
    if (this.#check) clearInterval(this.#check);
    this.#delivery.fail(this.#lost);
    this.#malformed.complete();
  }

  receive(max: number, timeoutMs?: number): Promise<BrokerMessage[]> {
    return this.#delivery.receive(max, timeoutMs);
  }

  /** @throws BrokerDisconnectedError when the connection is down for longer than reconnectTimeoutMs; BrokerDataLostError after data loss. */
  async ack(message: BrokerMessage): Promise<void> {
    if (this.#lost) throw this.#lost;
    if (!this.#delivery.has(message.id)) return;
    await this.#send({ messageId: message.id });
    this.#nacks.delete(message.id);
    this.#delivery.settle(message.id);
  }

  /** Redelivery after the delay, or the dead-letter topic once `maxRedeliveries` would be exceeded. */
  async nack(message: BrokerMessage, reason = 'nacked'): Promise<void> {
    if (this.#lost) throw this.#lost;
    if (!this.#delivery.has(message.id)) return;
    if (this.#c.maxRedeliveries >= 0 && message.redeliveryCount + 1 > this.#c.maxRedeliveries) {
      await this.deadLetter(message, reason);
      return;
    }
    await this.#send({ type: 'negativeAcknowledge', messageId: message.id });
    if (this.#c.type === 'exclusive' || this.#c.type === 'failover') this.#nacks.set(message.id, message.redeliveryCount + 1);
    this.#delivery.settle(message.id);
  }

  /** Publishes to the DLQ topic with `reason`, then acks. */
  async deadLetter(message: BrokerMessage, reason: string): Promise<void> {
    if (this.#lost) throw this.#lost;
    if (!this.#delivery.has(message.id)) return;
    const dlq = await this.#c.deadLetters();
    await sendDeadLetter(
      dlq,
      message.payload,
      {
        [Props.producer]: message.producer,
        [Props.sequence]: String(message.sequence),
        [Props.reason]: reason,
        [Props.origin]: message.id,
        [Props.redeliveryCount]: String(message.redeliveryCount),
        [Props.publishTime]: String(message.publishTime),
      },
      message.key,
    );
    await this.#send({ messageId: message.id });
    this.#nacks.delete(message.id);
    this.#delivery.settle(message.id);
  }

  /** Leaves; Pulsar redelivers this consumer's unacked messages to the others. Safe twice. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#closed = true;
      if (this.#check) clearInterval(this.#check);
      this.#delivery.close();
      this.#malformed.complete();
      const err = new BrokerClosedError('consumer is closed');
      for (const w of this.#waiters.splice(0)) w.reject(err);
      const ws = this.#ws;
      this.#ws = undefined;
      if (ws) await closeSocket(ws);
      this.#c.onClose(this);
    })();
    return this.#closing;
  }

  /**
   * Opens the consumer's socket. A consumer of this exclusive or failover subscription that
   * was just closed (its WebSocket closed) may still hold it on the broker for a moment, which
   * the proxy answers with 409 "already connected": tried again every 100 ms for up to 2 s,
   * so a close followed by a subscribe (a partition's restart) does not fail on that moment.
   * A consumer still connected after that is a real conflict.
   * @throws InvalidArgumentError (exclusive taken, type mismatch), BrokerDisconnectedError
   */
  async #openReleased(): Promise<WebSocket> {
    const until = Date.now() + 2000;
    for (;;) {
      try {
        return await openSocket(this.#url(), this.#c.connectTimeoutMs, this.#listener);
      } catch (err) {
        if (!(err instanceof InvalidArgumentError) || !/already connected/i.test(err.message) || Date.now() >= until) throw err;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  }

  /** Registered by `openSocket` before the socket opens (see there: early frames). */
  readonly #listener = (data: WebSocket.RawData): void => this.#onMessage(String(data));

  #url(): string {
    const c = this.#c;
    const q = new URLSearchParams({
      subscriptionType: TYPES[c.type],
      receiverQueueSize: String(c.receiverQueueSize),
      negativeAckRedeliveryDelay: String(c.nackRedeliveryDelayMs),
      subscriptionInitialPosition: 'Earliest',
    });
    if (c.priority !== undefined) q.set('priorityLevel', String(MAX_SUBSCRIBE_PRIORITY - c.priority));
    if (c.maxRedeliveries >= 0) {
      // Backstop only: nack() dead-letters itself first (with a reason) at the same count.
      q.set('maxRedeliverCount', String(c.maxRedeliveries + 1));
      q.set('deadLetterTopic', fullName(c.deadLetterTarget));
    }
    return `${c.wsUrl}/ws/v2/consumer/${topicPath(c.target)}/${encodeURIComponent(c.subscription)}?${q}`;
  }

  #attach(ws: WebSocket): void {
    this.#ws = ws;
    for (const w of this.#waiters.splice(0)) w.resolve(ws);
    ws.on('error', () => {}); // 'close' follows; reconnecting handles it
    ws.on('close', () => {
      if (this.#ws !== ws) return;
      this.#ws = undefined;
      if (!this.#closed) void this.#reconnect();
    });
  }

  async #reconnect(): Promise<void> {
    const started = Date.now();
    let backoff = 100;
    while (!this.#closed) {
      try {
        const ws = await openSocket(this.#url(), this.#c.connectTimeoutMs, this.#listener);
        if (this.#closed) {
          ws.terminate();
          return;
        }
        this.#attach(ws);
        return;
      } catch (err) {
        if (Date.now() - started > this.#c.reconnectTimeoutMs) {
          const failure = new BrokerDisconnectedError(
            `pulsar consumer ${this.#c.subscription} on ${topicName(this.#c.topic)}: cannot reconnect for ${this.#c.reconnectTimeoutMs} ms`,
            { cause: err },
          );
          this.#delivery.fail(failure);
          for (const w of this.#waiters.splice(0)) w.reject(failure);
          return;
        }
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 2000);
      }
    }
  }

  async #send(frame: object): Promise<void> {
    if (this.#closed) throw new BrokerClosedError('consumer is closed');
    const ws = this.#ws ?? (await new Promise<WebSocket>((resolve, reject) => this.#waiters.push({ resolve, reject })));
    await new Promise<void>((resolve, reject) =>
      ws.send(JSON.stringify(frame), (err) =>
        err ? reject(new BrokerDisconnectedError(`pulsar consumer send: ${err.message}`, { cause: err })) : resolve(),
      ),
    );
  }

  #onMessage(text: string): void {
    let m: WsMessage;
    try {
      m = JSON.parse(text) as WsMessage;
    } catch (err) {
      process.emitWarning(`pulsar consumer on ${topicName(this.#c.topic)}: unparsable frame: ${(err as Error).message}`);
      return;
    }
    if (typeof m.messageId !== 'string' || typeof m.payload !== 'string') return; // e.g. an answer to a command
    const message = toMessage(this.#c.topic, m);
    const props = m.properties ?? {};
    const problem = entryProblem(
      { payload: message.payload, producer: props[Props.producer], sequence: props[Props.sequence] },
      this.#c.maxPayloadBytes,
      { payload: 'payload', producer: `property ${Props.producer}`, sequence: `property ${Props.sequence}` },
    );
    if (problem !== undefined) {
      void this.#bury({ message, reason: problem, malformed: true }, props);
      return;
    }
    const counted = this.#nacks.get(message.id);
    this.#delivery.deliver(counted !== undefined && counted > message.redeliveryCount ? { ...message, redeliveryCount: counted } : message);
  }

  /**
   * Moves a malformed message to the DLQ topic (its own properties kept, ours added), acks
   * it and reports it; on failure nacks it so that it comes back. Never rejects.
   */
  async #bury(dead: DeadLetter, properties: Record<string, string>): Promise<void> {
    const m = dead.message;
    try {
      const dlq = await this.#c.deadLetters();
      await sendDeadLetter(
        dlq,
        m.payload,
        {
          ...properties,
          [Props.reason]: dead.reason,
          [Props.origin]: m.id,
          [Props.redeliveryCount]: String(m.redeliveryCount),
          [Props.publishTime]: String(m.publishTime),
          [Props.malformed]: '1',
        },
        m.key,
      );
      await this.#send({ messageId: m.id });
      this.#malformed.record(dead);
    } catch (err) {
      if (this.#closed) return; // unacked: Pulsar delivers it again to the next consumer
      process.emitWarning(
        `pulsar consumer of ${this.#c.subscription} on ${topicName(this.#c.topic)}: could not dead-letter malformed ${m.id} (${dead.reason}): ${(err as Error).message}; nacked to retry`,
        { code: 'SF_MALFORMED_ENTRY' },
      );
      await this.#send({ type: 'negativeAcknowledge', messageId: m.id }).catch(() => undefined);
    }
  }
}

/**
 * Publishes a dead letter; one whose payload does not fit a WebSocket frame (a foreign
 * producer's message, sent over Pulsar's binary protocol) goes without it, its reason saying
 * so and how large it was: the reason is kept, the payload cannot be.
 */
async function sendDeadLetter(dlq: PulsarProducer, payload: Uint8Array, properties: Record<string, string>, key: string | undefined): Promise<void> {
  try {
    await dlq.sendRaw(payload, properties, key);
  } catch (err) {
    if (!(err instanceof PayloadTooLargeError)) throw err;
    const reason = `${properties[Props.reason] ?? ''}; its payload of ${payload.byteLength} bytes was not kept: ${err.message}`;
    await dlq.sendRaw(new Uint8Array(0), { ...properties, [Props.reason]: reason }, key);
  }
}

/**
 * A WebSocket message as a `BrokerMessage`, leniently: a missing or empty producer reads
 * `?`, a missing or unreadable sequence 0 (callers check `entryProblem` before delivering).
 */
function toMessage(topic: Topic, m: WsMessage): BrokerMessage {
  const props = m.properties ?? {};
  const payload = Buffer.from(m.payload, 'base64');
  const producer = props[Props.producer];
  return {
    id: m.messageId,
    topic,
    payload: new Uint8Array(payload.buffer, payload.byteOffset, payload.byteLength),
    producer: producer ? producerId(producer) : ('?' as ProducerId),
    sequence: (props[Props.sequence] !== undefined ? parseSequence(props[Props.sequence]!) : undefined) ?? sequence(0),
    ...(m.key !== undefined ? { key: m.key } : {}),
    redeliveryCount: m.redeliveryCount ?? 0,
    publishTime: m.publishTime ? Date.parse(m.publishTime) : 0,
  };
}

/** Parses a WebSocket message frame (for readers of dead-letter topics); lenient like `toMessage`. */
export function parseFrame(topic: Topic, text: string): { message: BrokerMessage; properties: Record<string, string> } | undefined {
  const m = JSON.parse(text) as WsMessage;
  if (typeof m.messageId !== 'string' || typeof m.payload !== 'string') return undefined;
  return { message: toMessage(topic, m), properties: m.properties ?? {} };
}
