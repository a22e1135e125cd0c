import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Redis, type RedisOptions } from 'ioredis';
import { BrokerClosedError, BrokerDisconnectedError, InvalidArgumentError } from '../../errors.js';
import { sequence as toSequence, type ProducerId } from '../ids.js';
import { topicName, type Topic } from '../topics.js';
import type { Broker, Consumer, DeadLetter, Producer, ProducerOptions, SendOptions, SubscribeOptions } from './broker.js';
import type { BrokerIdentity } from './identity.js';
import { RedisConsumer, type RedisConsumerTimings } from './redis/consumer.js';
import { DEFAULT_MAX_DEAD_LETTERS, DEFAULT_MAX_PAYLOAD_BYTES, checkSendSize, positiveInteger } from './internal/malformed.js';
import { entryFields, toDeadLetter } from './redis/entry.js';
import { streamKey, subscriptionKeys } from './redis/keys.js';

/** Options of `RedisStreamsBroker.connect`. Times in ms. */
export interface RedisStreamsBrokerOptions {
  /** `redis://host:port/db`. Default `redis://127.0.0.1:6379`. */
  readonly url?: string;
  /** Key prefix (see `redis/keys.ts`). Default `sf:`. */
  readonly prefix?: string;
  /** Liveness refresh, lock renewal, dead-consumer reaping and trimming period. Default 500. */
  readonly heartbeatMs?: number;
  /**
   * A consumer whose liveness key was not refreshed for this long is dead: its pending
   * entries go to the others and its lock expires. Must be > 2 * heartbeatMs. Default 5000.
   */
  readonly deadAfterMs?: number;
  /** Longest XREADGROUP BLOCK; bounds how late a nack delay or handover is noticed. Default 250. */
  readonly blockMs?: number;
  /** A consumer whose fetches fail for this long errors with BrokerDisconnectedError. Default 30000. */
  readonly reconnectTimeoutMs?: number;
  /** Connect (and first PING) timeout of `connect`. Default 5000. */
  readonly connectTimeoutMs?: number;
  /**
   * Longest payload in bytes: a longer `send` throws InvalidArgumentError, a longer entry
   * read from the stream (a foreign producer's) is dead-lettered as malformed. Default 5 MiB
   * (`DEFAULT_MAX_PAYLOAD_BYTES`, Pulsar's default `maxMessageSize`).
   */
  readonly maxPayloadBytes?: number;
  /**
   * Bound of each dead-letter stream: `XADD ... MAXLEN ~ maxDeadLetters`, so it keeps at
   * least that many and at most about 100 more (Redis trims whole nodes of
   * `stream-node-max-entries`), the oldest going first. Default 10 000.
   */
  readonly maxDeadLetters?: number;
  /** Extra ioredis options (TLS, password, ...), merged under ours. */
  readonly redis?: RedisOptions;
}

/** Size limits of a Redis broker (resolved `maxPayloadBytes`, `maxDeadLetters`). */
interface RedisLimits {
  readonly maxPayloadBytes: number;
  readonly maxDeadLetters: number;
}

/**
 * The Redis Streams broker (Redis >= 6.2, standalone; tested on Debian's 7.0).
 *
 * Mapping onto Redis (keys in `redis/keys.ts`, atomic steps in `redis/scripts.ts`):
 * - topic -> stream `sf:<namespace>/<partition>`; a message is one entry with fields
 *   `payload`, `producer`, `sequence` (and `key`); its id is the entry id.
 * - subscription -> consumer group, created at id 0 (earliest retained entry) on first use;
 *   consumer -> group consumer with a unique name.
 * - delivery -> XREADGROUP with COUNT = free room under `receiverQueueSize`; ack -> XACK.
 * - nack -> the id goes to a per-subscription "ready" sorted set due after the delay; a
 *   consumer claims it with XCLAIM, which bumps Redis' delivery counter (redeliveryCount =
 *   counter - 1). Past `maxRedeliveries` the entry is copied to the dead-letter stream
 *   `sf:<ns>/<p>:<sub>:dlq` (capped, `maxDeadLetters`) with `reason`, then acked.
 * - an entry that is not a message (foreign fields, bad sequence, oversized payload) -> the
 *   dead-letter stream as well, flagged `malformed`; the rest of its batch is delivered.
 * - stream or group gone under a consumer (NOGROUP) -> `BrokerDataLostError`.
 * - consumer leaves -> its pending entries go to "ready" at once; consumer dies (no
 *   heartbeat for `deadAfterMs`) -> the others do that for it.
 * - exclusive/failover -> a lock key per subscription (SET NX PX, renewed each heartbeat);
 *   shared -> every consumer reads the group. key_shared is not offered: Redis groups have
 *   no key affinity (InvalidArgumentError).
 * - retention -> each heartbeat trims the stream below the oldest entry a group still needs.
 *
 * Durability is the server's: `send` resolves when Redis has the entry in memory; with
 * scripts/redis/start.sh's AOF (fsync every second) a clean restart loses nothing, a power
 * cut up to a second. A restart without persistence loses the groups: live consumers then
 * fail with `BrokerDataLostError`.
 *
 * Connections: one shared, auto-pipelined command connection, plus one per consumer for its
 * blocking reads.
 */
export class RedisStreamsBroker implements Broker {
  readonly kind = 'redis';

  /** The largest payload a send accepts, in bytes (see `Broker.maxPayloadBytes`). */
  get maxPayloadBytes(): number {
    return this.#limits.maxPayloadBytes;
  }
  /** `{ kind: 'redis', url, scope: prefix }`, the url as given to `connect` (default `redis://127.0.0.1:6379`). */
  readonly identity: BrokerIdentity;
  readonly #redis: Redis;
  readonly #prefix: string;
  readonly #timings: RedisConsumerTimings;
  readonly #limits: RedisLimits;
  readonly #consumers = new Set<RedisConsumer>();
  readonly #producers = new Set<RedisProducer>();
  #closed = false;
  /** Last connection-level error, for messages (ioredis reports them as events). */
  #lastError: Error | undefined;

  private constructor(redis: Redis, url: string, prefix: string, timings: RedisConsumerTimings, limits: RedisLimits) {
    this.identity = Object.freeze({ kind: 'redis', url, scope: prefix });
    this.#redis = redis;
    this.#prefix = prefix;
    this.#timings = timings;
    this.#limits = limits;
    redis.on('error', (err: Error) => {
      this.#lastError = err;
    });
  }

  /**
   * Connects and checks the server with PING.
   * @throws InvalidArgumentError on inconsistent timings.
   * @throws BrokerDisconnectedError when Redis does not answer within `connectTimeoutMs`.
   */
  static async connect(options: RedisStreamsBrokerOptions = {}): Promise<RedisStreamsBroker> {
    const heartbeatMs = options.heartbeatMs ?? 500;
    const timings: RedisConsumerTimings = {
      heartbeatMs,
      deadAfterMs: options.deadAfterMs ?? Math.max(5000, 3 * heartbeatMs),
      blockMs: options.blockMs ?? 250,
      reconnectTimeoutMs: options.reconnectTimeoutMs ?? 30_000,
    };
    for (const [k, v] of Object.entries(timings)) {
      if (!Number.isInteger(v) || v < 1) throw new InvalidArgumentError(`${k} must be a positive integer (ms), got ${v}`);
    }
    if (timings.deadAfterMs <= 2 * timings.heartbeatMs) {
      throw new InvalidArgumentError(`deadAfterMs (${timings.deadAfterMs}) must exceed 2 * heartbeatMs (${timings.heartbeatMs})`);
    }
    const limits: RedisLimits = {
      maxPayloadBytes: positiveInteger('maxPayloadBytes', options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES),
      maxDeadLetters: positiveInteger('maxDeadLetters', options.maxDeadLetters ?? DEFAULT_MAX_DEAD_LETTERS),
    };
    const url = options.url ?? 'redis://127.0.0.1:6379';
    const connectTimeout = options.connectTimeoutMs ?? 5000;
    const redis = new Redis(url, {
      ...options.redis,
      lazyConnect: true,
      enableAutoPipelining: true,
      connectTimeout,
    });
    const broker = new RedisStreamsBroker(redis, url, options.prefix ?? 'sf:', timings, limits);
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        redis.connect().then(() => redis.ping()),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${connectTimeout} ms`)), connectTimeout);
        }),
      ]);
    } catch (err) {
      redis.disconnect();
      throw new BrokerDisconnectedError(`cannot reach redis at ${url}: ${(err as Error).message}`, { cause: err });
    } finally {
      clearTimeout(timer);
    }
    return broker;
  }

  /** @throws BrokerClosedError after `close()`. */
  async producer(topic: Topic, options: ProducerOptions): Promise<Producer> {
    this.#assertOpen();
    const p = new RedisProducer(
      this.#redis, streamKey(this.#prefix, topic), topic, options.producer, () => this.#closed, (x) => this.#producers.delete(x), this.#limits.maxPayloadBytes,
    );
    this.#producers.add(p);
    return p;
  }

  /**
   * @throws InvalidArgumentError on a second consumer of an exclusive subscription, a type
   *   other than the subscription's, or `key_shared`.
   * @throws BrokerDisconnectedError when Redis cannot be reached.
   */
  async subscribe(topic: Topic, options: SubscribeOptions): Promise<Consumer> {
    this.#assertOpen();
    if (options.type === 'key_shared') {
      throw new InvalidArgumentError('the redis broker has no key_shared subscriptions (consumer groups have no key affinity)');
    }
    if (options.subscription.length === 0 || /[\s:]/.test(options.subscription)) {
      throw new InvalidArgumentError(`subscription name must be non-empty without spaces or ':', got ${JSON.stringify(options.subscription)}`);
    }
    const keys = subscriptionKeys(this.#prefix, topic, options.subscription);
    const consumer = await this.#call('subscribe', async () => {
      await this.#redis.hsetnx(keys.meta, 'type', options.type);
      const type = await this.#redis.hget(keys.meta, 'type');
      if (type !== options.type) {
        throw new InvalidArgumentError(`subscription ${options.subscription} on ${topicName(topic)} is ${type}, not ${options.type}`);
      }
      try {
        await this.#redis.xgroup('CREATE', keys.stream, options.subscription, '0', 'MKSTREAM');
      } catch (err) {
        if (!(err instanceof Error && err.message.startsWith('BUSYGROUP'))) throw err;
      }
      const blocking = this.#redis.duplicate({ enableAutoPipelining: false });
      blocking.on('error', (err: Error) => {
        this.#lastError = err;
      });
      const c = new RedisConsumer({
        redis: this.#redis,
        blocking,
        topic,
        keys,
        subscription: options.subscription,
        type: options.type,
        name: `${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`,
        receiverQueueSize: options.receiverQueueSize ?? 1000,
        nackRedeliveryDelayMs: options.nackRedeliveryDelayMs ?? 1000,
        maxRedeliveries: options.maxRedeliveries ?? -1,
        maxPayloadBytes: this.#limits.maxPayloadBytes,
        maxDeadLetters: this.#limits.maxDeadLetters,
        timings: this.#timings,
        onClose: (x) => this.#consumers.delete(x),
      });
      try {
        await c.start();
      } catch (err) {
        blocking.disconnect();
        throw err;
      }
      return c;
    });
    this.#consumers.add(consumer);
    return consumer;
  }

  /** Entries of the subscription's dead-letter stream, oldest first. */
  async deadLetters(topic: Topic, subscription: string): Promise<DeadLetter[]> {
    const keys = subscriptionKeys(this.#prefix, topic, subscription);
    const entries = await this.#call('deadLetters', () => this.#redis.xrangeBuffer(keys.dlq, '-', '+'));
    return entries.map(([, fields]) => toDeadLetter(topic, fields));
  }

  /**
   * Entries of the subscription's consumer group not acked: its pending entries plus its
   * lag (entries not delivered yet; XINFO GROUPS, Redis 7). When Redis cannot count the lag
   * (entries deleted from the stream), an entry after the last delivered one counts as 1.
   * @returns undefined when the stream or the group does not exist
   */
  async subscriptionBacklog(topic: Topic, subscription: string): Promise<number | undefined> {
    const keys = subscriptionKeys(this.#prefix, topic, subscription);
    return this.#call('backlog', async () => {
      let groups: unknown[];
      try {
        groups = (await this.#redis.xinfo('GROUPS', keys.stream)) as unknown[];
      } catch (err) {
        if (/no such key/i.test((err as Error).message)) return undefined;
        throw err;
      }
      for (const g of groups) {
        const fields = g as unknown[];
        const info = new Map<string, unknown>();
        for (let i = 0; i + 1 < fields.length; i += 2) info.set(String(fields[i]), fields[i + 1]);
        if (info.get('name') !== subscription) continue;
        const pending = Number(info.get('pending') ?? 0);
        const lag = info.get('lag');
        if (typeof lag === 'number') return pending + lag;
        const newer = await this.#redis.xrange(keys.stream, `(${String(info.get('last-delivered-id'))}`, '+', 'COUNT', 1);
        return pending + newer.length;
      }
      return undefined;
    });
  }

  /**
   * Closes consumers (handing their pending entries over) and producers, then the
   * connection. Safe twice.
   * @throws BrokerDisconnectedError (the first) when a consumer could not hand over.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const results = await Promise.allSettled([
      ...[...this.#consumers].map((c) => c.close()),
      ...[...this.#producers].map((p) => p.close()),
    ]);
    await this.#redis.quit().catch(() => this.#redis.disconnect());
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  #assertOpen(): void {
    if (this.#closed) throw new BrokerClosedError('redis broker is closed');
  }

  async #call<T>(what: string, f: () => Promise<T>): Promise<T> {
    try {
      return await f();
    } catch (err) {
      if (err instanceof InvalidArgumentError) throw err;
      const last = this.#lastError ? ` (last connection error: ${this.#lastError.message})` : '';
      throw new BrokerDisconnectedError(`redis ${what} failed: ${(err as Error).message}${last}`, { cause: err });
    }
  }
}

/** XADD per send, in call order on the shared connection (auto-pipelined when concurrent). */
class RedisProducer implements Producer {
  #next = 0;
  #closed = false;
  readonly #pending = new Set<Promise<unknown>>();

  constructor(
    readonly redis: Redis,
    readonly stream: string,
    readonly topic: Topic,
    readonly producer: ProducerId,
    readonly brokerClosed: () => boolean,
    readonly onClose: (p: RedisProducer) => void,
    readonly maxPayloadBytes: number,
  ) {}

  /** @throws BrokerClosedError, BrokerDisconnectedError; InvalidArgumentError over `maxPayloadBytes`. */
  async send(payload: Uint8Array, options?: SendOptions): Promise<void> {
    if (this.#closed || this.brokerClosed()) throw new BrokerClosedError(`producer ${this.producer} on ${topicName(this.topic)} is closed`);
    checkSendSize(this.topic, payload.byteLength, this.maxPayloadBytes);
    const seq = options?.sequence ?? toSequence(this.#next);
    this.#next = Math.max(this.#next, seq + 1);
    const p = this.redis.xadd(this.stream, '*', ...entryFields(payload, this.producer, seq, options?.key));
    this.#pending.add(p);
    try {
      await p;
    } catch (err) {
      throw new BrokerDisconnectedError(`redis XADD to ${this.stream} failed: ${(err as Error).message}`, { cause: err });
    } finally {
      this.#pending.delete(p);
    }
  }

  /** Resolves when every send issued so far has been answered (failed ones rejected their own `send`). */
  async flush(): Promise<void> {
    await Promise.allSettled([...this.#pending]);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.flush();
    this.onClose(this);
  }
}
