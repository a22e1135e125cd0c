import { BrokerClosedError, BrokerDisconnectedError, InvalidArgumentError } from '../../../errors.js';
import { producerId } from '../../ids.js';
import type { Topic } from '../../topics.js';
import { MAX_SUBSCRIBE_PRIORITY, type Broker, type Consumer, type DeadLetter, type Producer, type ProducerOptions, type SubscribeOptions } from '../broker.js';
import type { BrokerIdentity } from '../identity.js';
import { DEFAULT_MAX_PAYLOAD_BYTES } from '../internal/malformed.js';
import { PulsarAdmin } from './admin.js';
import { parseFrame, PulsarConsumer } from './consumer.js';
import { deadLetterTopic, Props, pulsarTopic, topicPath, type PulsarTopicName } from './names.js';
import { closeSocket, PULSAR_WS_MAX_FRAME_BYTES, PulsarProducer, pulsarPayloadLimit } from './producer.js';
import { openSocket } from './socket.js';
import type WebSocket from 'ws';

/** Options of `PulsarBroker.connect`. Times in ms. */
export interface PulsarBrokerOptions {
  /** HTTP service (admin API and WebSocket). Default `http://127.0.0.1:8080`. */
  readonly webUrl?: string;
  /** Tenant holding our namespaces. Default `shardflow`. */
  readonly tenant?: string;
  /** WebSocket and admin request timeout. Default 10000. */
  readonly connectTimeoutMs?: number;
  /** Pulsar's send timeout per message. Default 30000. */
  readonly sendTimeoutMs?: number;
  /** Most unconfirmed sends per producer. Default 1000. */
  readonly maxPendingSends?: number;
  /** A consumer that cannot reconnect for this long errors. Default 60000. */
  readonly reconnectTimeoutMs?: number;
  /**
   * Longest payload in bytes: a longer `send` throws PayloadTooLargeError (nothing sent), a
   * longer message delivered (a foreign producer's) is dead-lettered as malformed. Default:
   * the most that fits one WebSocket frame of `maxFrameBytes` (`pulsarPayloadLimit`: 784,896
   * bytes for Pulsar's default 1 MiB frames), and never more than 5 MiB
   * (`DEFAULT_MAX_PAYLOAD_BYTES`, Pulsar's own default `maxMessageSize`). A larger value than
   * the frames take is refused at connect.
   */
  readonly maxPayloadBytes?: number;
  /**
   * The largest WebSocket text frame the Pulsar WebSocket proxy takes, in bytes: the broker's
   * `webSocketMaxTextFrameSize` (default 1,048,576). A send travels as one frame, its payload
   * in base64 (4 bytes per 3) inside JSON with its properties; a larger frame makes the proxy
   * close the connection, so a send whose frame is over it throws PayloadTooLargeError
   * instead. Default 1,048,576; raise it with the proxy's setting.
   */
  readonly maxFrameBytes?: number;
  /**
   * Bound of each dead-letter topic, in bytes of backlog: a topic-level backlog quota with
   * `consumer_backlog_eviction`, so Pulsar drops the oldest dead letters beyond it (checked
   * every `backlogQuotaCheckIntervalInSeconds`, 60 s by default, at ledger granularity: an
   * approximate bound, in bytes because Pulsar quotas have no message count). Default 64 MiB.
   */
  readonly maxDeadLetterBytes?: number;
  /** Period of each consumer's data-loss check (deleted topic or subscription), ms. Default 5000. */
  readonly dataLossCheckMs?: number;
}

/** Resolved numeric options. */
type Settings = Required<Omit<PulsarBrokerOptions, 'webUrl' | 'tenant'>>;

/** Subscription that keeps a dead-letter topic's messages retained (nobody reads it). */
const KEEP = 'shardflow-retain';

/** Largest receiver queue (prefetch window) Pulsar's WebSocket proxy accepts. */
const PULSAR_MAX_RECEIVER_QUEUE = 1000;

/**
 * The Pulsar broker, over Pulsar's WebSocket and REST admin APIs (no native client: the npm
 * `pulsar-client` needs the native libpulsar, which no reachable registry serves).
 *
 * Mapping: tenant `shardflow` (configurable), one Pulsar namespace per shardflow namespace
 * (created on first use), topic `persistent://shardflow/<namespace>/<partition>`
 * (non-partitioned, auto-created), subscriptions and their types are Pulsar's, dead letters
 * go to `<topic>-<subscription>-DLQ` with a `sf-reason` property (see `consumer.ts`), bounded
 * by a backlog quota (`maxDeadLetterBytes`). Malformed messages (not ours, or oversized) go
 * there too (`sf-malformed=1`); a deleted topic or subscription fails its consumers with
 * `BrokerDataLostError` (see `consumer.ts`).
 * Producer and sequence travel as message properties `sf-producer`, `sf-sequence`.
 *
 * Durability is Pulsar's: a send resolves once the bookie journal has it (the standalone of
 * scripts/pulsar/start.sh syncs the journal).
 */
export class PulsarBroker implements Broker {
  readonly kind = 'pulsar';

  /** The largest payload a send accepts, in bytes (see `Broker.maxPayloadBytes`). */
  get maxPayloadBytes(): number {
    return this.#o.maxPayloadBytes;
  }
  /**
   * `{ kind: 'pulsar', url: 'pulsar://host:port', scope: tenant }`: the web address in the
   * `pulsar://` form that `connectBroker` and `--broker` take (an `https://` one as given).
   */
  readonly identity: BrokerIdentity;
  readonly #admin: PulsarAdmin;
  readonly #wsUrl: string;
  readonly #tenant: string;
  readonly #o: Settings;
  readonly #namespaces = new Map<string, Promise<void>>();
  readonly #producers = new Set<PulsarProducer>();
  readonly #consumers = new Set<PulsarConsumer>();
  /** Dead-letter producers by DLQ topic path, opened on first dead letter. */
  readonly #deadLetterProducers = new Map<string, Promise<PulsarProducer>>();
  #closed = false;

  private constructor(admin: PulsarAdmin, webUrl: string, tenant: string, o: Settings) {
    this.identity = Object.freeze({ kind: 'pulsar', url: webUrl.replace(/^http:\/\//, 'pulsar://'), scope: tenant });
    this.#admin = admin;
    this.#wsUrl = webUrl.replace(/^http/, 'ws');
    this.#tenant = tenant;
    this.#o = o;
  }

  /**
   * Checks the admin API and creates the tenant if needed.
   * @throws BrokerDisconnectedError when Pulsar does not answer.
   */
  static async connect(options: PulsarBrokerOptions = {}): Promise<PulsarBroker> {
    const webUrl = (options.webUrl ?? 'http://127.0.0.1:8080').replace(/\/$/, '');
    const frameBytes = options.maxFrameBytes ?? PULSAR_WS_MAX_FRAME_BYTES;
    const fits = pulsarPayloadLimit(frameBytes);
    const o: Settings = {
      connectTimeoutMs: options.connectTimeoutMs ?? 10_000,
      sendTimeoutMs: options.sendTimeoutMs ?? 30_000,
      maxPendingSends: options.maxPendingSends ?? 1000,
      reconnectTimeoutMs: options.reconnectTimeoutMs ?? 60_000,
      maxPayloadBytes: options.maxPayloadBytes ?? Math.min(DEFAULT_MAX_PAYLOAD_BYTES, fits),
      maxFrameBytes: frameBytes,
      maxDeadLetterBytes: options.maxDeadLetterBytes ?? 64 * 1024 * 1024,
      dataLossCheckMs: options.dataLossCheckMs ?? 5000,
    };
    for (const [k, v] of Object.entries(o)) {
      if (!Number.isInteger(v) || v < 1) throw new InvalidArgumentError(`${k} must be a positive integer, got ${v}`);
    }
    if (o.maxPayloadBytes > fits) {
      throw new InvalidArgumentError(
        `maxPayloadBytes ${o.maxPayloadBytes} does not fit Pulsar's WebSocket frames of maxFrameBytes ${o.maxFrameBytes} (a payload travels in base64 inside JSON: at most ${fits} bytes); raise the proxy's webSocketMaxTextFrameSize and maxFrameBytes with it`,
      );
    }
    const admin = new PulsarAdmin(webUrl, o.connectTimeoutMs);
    const tenant = options.tenant ?? 'shardflow';
    await admin.ensureTenant(tenant);
    return new PulsarBroker(admin, webUrl, tenant, o);
  }

  /** @throws BrokerClosedError after close; BrokerDisconnectedError. */
  async producer(topic: Topic, options: ProducerOptions): Promise<Producer> {
    this.#assertOpen();
    await this.#namespace(topic);
    const p = await PulsarProducer.open({
      wsUrl: this.#wsUrl,
      target: pulsarTopic(this.#tenant, topic),
      topic,
      producer: options.producer,
      connectTimeoutMs: this.#o.connectTimeoutMs,
      sendTimeoutMs: this.#o.sendTimeoutMs,
      maxPending: this.#o.maxPendingSends,
      maxPayloadBytes: this.#o.maxPayloadBytes,
      maxFrameBytes: this.#o.maxFrameBytes,
    });
    this.#producers.add(p);
    return p;
  }

  /**
   * A `receiverQueueSize` above 1000 is lowered to 1000, the cap of Pulsar's WebSocket proxy
   * (it is a prefetch window: a smaller one only delivers in smaller steps), so that a stage's
   * default of 1024 runs on Pulsar as on the other brokers.
   * @throws InvalidArgumentError (exclusive taken, type mismatch, receiverQueueSize not an integer >= 1); BrokerDisconnectedError.
   */
  async subscribe(topic: Topic, options: SubscribeOptions): Promise<Consumer> {
    this.#assertOpen();
    const asked = options.receiverQueueSize ?? PULSAR_MAX_RECEIVER_QUEUE;
    if (!Number.isInteger(asked) || asked < 1) {
      throw new InvalidArgumentError(`receiverQueueSize must be an integer >= 1, got ${asked}`);
    }
    const receiverQueueSize = Math.min(asked, PULSAR_MAX_RECEIVER_QUEUE);
    await this.#namespace(topic);
    const dlq = deadLetterTopic(this.#tenant, topic, options.subscription);
    const c = await PulsarConsumer.open({
      wsUrl: this.#wsUrl,
      target: pulsarTopic(this.#tenant, topic),
      deadLetterTarget: dlq,
      topic,
      subscription: options.subscription,
      type: options.type,
      receiverQueueSize,
      nackRedeliveryDelayMs: options.nackRedeliveryDelayMs ?? 1000,
      maxRedeliveries: options.maxRedeliveries ?? -1,
      ...(options.priority !== undefined ? { priority: checkPriority(options.priority) } : {}),
      connectTimeoutMs: this.#o.connectTimeoutMs,
      reconnectTimeoutMs: this.#o.reconnectTimeoutMs,
      deadLetters: () => this.#deadLetterProducer(topic, dlq),
      maxPayloadBytes: this.#o.maxPayloadBytes,
      admin: this.#admin,
      dataLossCheckMs: this.#o.dataLossCheckMs,
      onClose: (x) => this.#consumers.delete(x),
    });
    this.#consumers.add(c);
    return c;
  }

  /**
   * Reads the subscription's DLQ topic from the start with a WebSocket reader, up to the
   * number of entries the topic retains (admin `internalStats`).
   *
   * Each attempt waits up to 3 s, three attempts. (The "reader sometimes gets nothing" seen
   * on the 4.0.7 standalone was the early-frame loss that `openSocket` now prevents; the
   * retries stay as a safety net.)
   * @throws BrokerDisconnectedError when the retained entries cannot be read.
   */
  async deadLetters(topic: Topic, subscription: string): Promise<DeadLetter[]> {
    const dlq = deadLetterTopic(this.#tenant, topic, subscription);
    const n = await this.#admin.retainedEntries(dlq);
    if (!n) return [];
    let got: DeadLetter[] = [];
    for (let attempt = 0; attempt < 3 && got.length < n; attempt++) got = await this.#readDeadLetters(topic, dlq, n, 3000);
    if (got.length < n) throw new BrokerDisconnectedError(`reading ${topicPath(dlq)}: ${got.length} of ${n} retained entries`);
    return got;
  }

  /**
   * The subscription's `msgBacklog` from the topic's admin stats (entries not acked).
   * @returns undefined when the topic or the subscription does not exist
   */
  async subscriptionBacklog(topic: Topic, subscription: string): Promise<number | undefined> {
    const stats = await this.#admin.topicStats(`persistent://${this.#tenant}/${topic.namespace}/${topic.partition}`);
    const sub = stats?.subscriptions?.[subscription];
    return sub === undefined ? undefined : (sub.msgBacklog ?? 0);
  }

  /** One reader pass: up to `n` dead letters or what arrived within `waitMs`. */
  async #readDeadLetters(topic: Topic, dlq: PulsarTopicName, n: number, waitMs: number): Promise<DeadLetter[]> {
    const out: DeadLetter[] = [];
    const early: string[] = [];
    let ws: WebSocket | undefined;
    let done: () => void = () => {};
    const finished = new Promise<void>((resolve) => (done = resolve));
    // Registered before the socket opens: the reader pushes right after the upgrade (see openSocket).
    const onMessage = (data: WebSocket.RawData): void => {
      const f = parseFrame(topic, String(data));
      if (!f) return;
      if (ws) ws.send(JSON.stringify({ messageId: f.message.id }));
      else early.push(f.message.id);
      const p = f.properties;
      out.push({
        message: {
          ...f.message,
          id: p[Props.origin] ?? f.message.id,
          redeliveryCount: Number(p[Props.redeliveryCount] ?? f.message.redeliveryCount),
          publishTime: Number(p[Props.publishTime] ?? f.message.publishTime),
        },
        reason: p[Props.reason] ?? 'exceeded maxRedeliveries (Pulsar dead-letter policy)',
        ...(p[Props.malformed] === '1' ? { malformed: true } : {}),
      });
      if (out.length >= n) done();
    };
    ws = await openSocket(`${this.#wsUrl}/ws/v2/reader/${topicPath(dlq)}?messageId=earliest&receiverQueueSize=1000`, this.#o.connectTimeoutMs, onMessage);
    for (const id of early) ws.send(JSON.stringify({ messageId: id }));
    const timer = setTimeout(done, waitMs);
    try {
      if (out.length < n) {
        ws.on('close', done);
        await finished;
      }
    } finally {
      clearTimeout(timer);
      await closeSocket(ws);
    }
    return out;
  }

  /** Closes consumers, producers and dead-letter producers. Safe twice. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.allSettled([...this.#consumers].map((c) => c.close()));
    const dlqs = await Promise.allSettled([...this.#deadLetterProducers.values()]);
    await Promise.allSettled([
      ...[...this.#producers].map((p) => p.close()),
      ...dlqs.flatMap((r) => (r.status === 'fulfilled' ? [r.value.close()] : [])),
    ]);
  }

  #namespace(topic: Topic): Promise<void> {
    let p = this.#namespaces.get(topic.namespace);
    if (!p) {
      p = this.#admin.ensureNamespace(this.#tenant, topic.namespace);
      p.catch(() => this.#namespaces.delete(topic.namespace)); // retried on the next call
      this.#namespaces.set(topic.namespace, p);
    }
    return p;
  }

  #deadLetterProducer(topic: Topic, dlq: PulsarTopicName): Promise<PulsarProducer> {
    const key = topicPath(dlq);
    let p = this.#deadLetterProducers.get(key);
    if (!p) {
      p = (async () => {
        await this.#admin.ensureTopic(dlq);
        await this.#admin.ensureSubscription(dlq, KEEP);
        await this.#admin.setBacklogQuota(dlq, this.#o.maxDeadLetterBytes).catch((err: unknown) => {
          // Topic policies off on this cluster: dead letters still work, unbounded.
          process.emitWarning(`pulsar dead-letter topic ${topicPath(dlq)}: no backlog quota (${(err as Error).message}); it is unbounded`);
        });
        return PulsarProducer.open({
          wsUrl: this.#wsUrl,
          target: dlq,
          topic,
          producer: producerId('shardflow-dead-letters'),
          connectTimeoutMs: this.#o.connectTimeoutMs,
          sendTimeoutMs: this.#o.sendTimeoutMs,
          maxPending: this.#o.maxPendingSends,
          maxPayloadBytes: this.#o.maxPayloadBytes,
          maxFrameBytes: this.#o.maxFrameBytes,
        });
      })();
      p.catch(() => this.#deadLetterProducers.delete(key));
      this.#deadLetterProducers.set(key, p);
    }
    return p;
  }

  #assertOpen(): void {
    if (this.#closed) throw new BrokerClosedError('pulsar broker is closed');
  }
}

/** @throws InvalidArgumentError unless `priority` is an integer in 0 .. 2^31 - 1 (`SubscribeOptions.priority`) */
function checkPriority(priority: number): number {
  if (!Number.isInteger(priority) || priority < 0 || priority > MAX_SUBSCRIBE_PRIORITY) throw new InvalidArgumentError(`priority must be an integer in [0, 2^31 - 1], got ${priority}`);
  return priority;
}
