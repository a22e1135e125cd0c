import type { Redis } from 'ioredis';
import type { Observable } from 'rxjs';
import { BrokerClosedError, BrokerDataLostError, BrokerDisconnectedError, InvalidArgumentError } from '../../../errors.js';
import { topicName, type Topic } from '../../topics.js';
import type { BrokerMessage, Consumer, DeadLetter, SubscriptionType } from '../broker.js';
import { Delivery } from '../internal/delivery.js';
import { MalformedLog } from '../internal/malformed.js';
import { compareIds, decodeEntry } from './entry.js';
import type { SubscriptionKeys } from './keys.js';
import { runScript } from './scripts.js';

/** Timing knobs of a Redis consumer, all in ms (see `RedisStreamsBrokerOptions`). */
export interface RedisConsumerTimings {
  readonly heartbeatMs: number;
  readonly deadAfterMs: number;
  readonly blockMs: number;
  readonly reconnectTimeoutMs: number;
}

type Entry = [id: Buffer, fields: Buffer[] | null];

/**
 * True for the errors Redis gives when a subscription's stream or consumer group is gone:
 * `NOGROUP` (a command on a missing key or group) and `UNBLOCKED the stream key no longer
 * exists` / `... consumer group ... destroyed` (a blocked XREADGROUP whose key or group was
 * deleted; Redis 7).
 */
export function isDataLoss(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  return err.message.startsWith('NOGROUP') || /^UNBLOCKED .*(no longer exists|destroyed)/.test(err.message);
}

/**
 * The entries of an XREADGROUP reply for one or more streams. ioredis 6 returns it as the
 * flat map form `[key1, entries1, key2, entries2, ...]`; older clients as
 * `[[key1, entries1], ...]`. Null (timeout) is no entries; deleted entries (null fields) are
 * skipped.
 */
function streamEntries(reply: unknown): Array<[Buffer, Buffer[]]> {
  if (!Array.isArray(reply)) return [];
  const lists: Entry[][] = [];
  if (Buffer.isBuffer(reply[0])) {
    for (let i = 1; i < reply.length; i += 2) lists.push(reply[i] as Entry[]);
  } else {
    for (const pair of reply as Array<[Buffer, Entry[]]>) lists.push(pair[1]);
  }
  const out: Array<[Buffer, Buffer[]]> = [];
  for (const list of lists) for (const [id, fields] of list) if (fields) out.push([id, fields]);
  return out;
}

/** Everything a `RedisConsumer` is made of; built by `RedisStreamsBroker.subscribe`. */
export interface RedisConsumerConfig {
  /** Shared command connection (auto-pipelined). */
  readonly redis: Redis;
  /** This consumer's own connection for blocking XREADGROUP; disconnected on close. */
  readonly blocking: Redis;
  readonly topic: Topic;
  readonly keys: SubscriptionKeys;
  readonly subscription: string;
  readonly type: SubscriptionType;
  /** Unique consumer name inside the group. */
  readonly name: string;
  readonly receiverQueueSize: number;
  readonly nackRedeliveryDelayMs: number;
  /** -1 = unlimited. */
  readonly maxRedeliveries: number;
  /** Entries with a longer payload are dead-lettered as malformed. */
  readonly maxPayloadBytes: number;
  /** `MAXLEN ~` of the dead-letter stream. */
  readonly maxDeadLetters: number;
  readonly timings: RedisConsumerTimings;
  readonly onClose: (c: RedisConsumer) => void;
}

/**
 * One consumer of a subscription, over a consumer group.
 *
 * Fetch loop (while it has capacity and is active): first claim entries due in the `ready`
 * set (nacked ones whose delay passed, and those handed over by closed or dead consumers),
 * then read new entries with `XREADGROUP ... COUNT <free> BLOCK <blockMs> STREAMS <s> >`.
 * Claiming before reading keeps a handed-over backlog ahead of newer entries.
 *
 * Heartbeat (every `heartbeatMs`): refreshes this consumer's liveness key (expiry
 * `deadAfterMs`), renews or tries to take the subscription lock (exclusive, failover), hands
 * the pending entries of dead consumers to `ready` and trims the stream to what some group
 * still needs. Not XAUTOCLAIM: that claims by idle time alone and would take entries from a
 * live consumer that is merely slow, breaking the unacked bound; liveness keys say who is
 * dead.
 *
 * Exclusive and failover: only the holder of the lock key (`SET NX PX deadAfterMs`, renewed
 * each heartbeat) reads, and it claims and reads in scripts that check the lock first
 * (`sfClaimReady` with the lock, `sfReadHeld`), waiting for new entries with a plain
 * `XREAD BLOCK` that changes nothing in the group: a holder paused past its lease reads
 * nothing once it wakes, and no blocked read of it is served meanwhile. A failover standby polls the lock each heartbeat; on taking it, it
 * hands every other consumer's pending entries to `ready` first, live or not (a holder
 * killed between refreshing its liveness key and renewing the lock outlives its lock), so the
 * old holder's entries come before new ones: receivers that keep a mark per producer
 * (appliedMarks.ts) would drop an older entry delivered after a newer one as applied.
 *
 * Malformed entries (see `internal/malformed.ts`): a read or claimed entry that is not a
 * message is not delivered; after the valid ones of its batch are, it is dead-lettered
 * (`sfDeadLetter`, flagged malformed), which acks it, and reported on `malformed$`. One that
 * could not be moved yet (Redis unreachable) is retried before the next fetch.
 *
 * Data loss: NOGROUP (the stream or the group vanished: a `DEL`, a flushed or restarted Redis
 * without persistence) fails `messages$` and `receive` with `BrokerDataLostError`; so does an
 * ack, nack or dead letter that meets it. The consumer stops fetching; `close()` then only
 * cleans up its keys.
 */
export class RedisConsumer implements Consumer {
  readonly #c: RedisConsumerConfig;
  readonly #delivery: Delivery;
  #active: boolean;
  #closed = false;
  #closing: Promise<void> | undefined;
  #loop: Promise<void> = Promise.resolve();
  #timer: NodeJS.Timeout | undefined;
  #wake: (() => void) | undefined;
  #beating = false;
  readonly #malformed: MalformedLog;
  /** Malformed entries read but not moved to the dead-letter stream yet. */
  #toBury: DeadLetter[] = [];
  /** Set once the subscription's data is gone. */
  #lost: BrokerDataLostError | undefined;
  /** Resolves on close: fetches race it, since a command queued while ioredis reconnects
   * never settles once its connection is disconnected. */
  readonly #stopped: Promise<void>;
  #stop: () => void = () => {};

  /** Use `RedisStreamsBroker.subscribe`; call `start()` before use. */
  constructor(config: RedisConsumerConfig) {
    this.#c = config;
    this.#delivery = new Delivery(config.receiverQueueSize, () => this.#poke());
    this.#active = config.type === 'shared';
    this.#malformed = new MalformedLog(`redis consumer ${config.name} of ${config.subscription} on ${topicName(config.topic)}`);
    this.#stopped = new Promise((resolve) => {
      this.#stop = resolve;
    });
  }

  get messages$(): Observable<BrokerMessage> {
    return this.#delivery.messages$;
  }

  get malformed$(): Observable<DeadLetter> {
    return this.#malformed.malformed$;
  }

  /** The consumer's name in the group (`XINFO CONSUMERS`). */
  get name(): string {
    return this.#c.name;
  }

  /**
   * Registers liveness, takes the lock of an exclusive subscription, starts the heartbeat
   * and the fetch loop.
   * @throws InvalidArgumentError when an exclusive subscription already has a live consumer.
   */
  async start(): Promise<void> {
    const { redis, keys, name, timings } = this.#c;
    await redis.set(keys.alivePrefix + name, '1', 'PX', timings.deadAfterMs);
    if (this.#c.type === 'exclusive' || this.#c.type === 'failover') {
      const got = await redis.set(keys.lock, name, 'PX', timings.deadAfterMs, 'NX');
      if (got === 'OK') {
        this.#active = true;
      } else if (this.#c.type === 'exclusive') {
        await redis.del(keys.alivePrefix + name);
        throw new InvalidArgumentError(
          `exclusive subscription ${this.#c.subscription} on ${topicName(this.#c.topic)} already has a consumer (${await redis.get(keys.lock)})`,
        );
      }
    }
    if (this.#active) await this.#reap(true);
    this.#timer = setInterval(() => void this.#beat(), timings.heartbeatMs);
    this.#loop = this.#run();
  }

  receive(max: number, timeoutMs?: number): Promise<BrokerMessage[]> {
    return this.#delivery.receive(max, timeoutMs);
  }

  /** @throws BrokerDisconnectedError when Redis cannot be reached; BrokerDataLostError after data loss. */
  async ack(message: BrokerMessage): Promise<void> {
    if (this.#lost) throw this.#lost;
    if (!this.#delivery.has(message.id)) return;
    const { keys, subscription, name } = this.#c;
    await this.#command('ack', () => runScript(this.#c.redis, 'sfAck', [keys.stream, keys.ready], [subscription, name, message.id]));
    this.#delivery.settle(message.id);
  }

  /** @throws BrokerDisconnectedError when Redis cannot be reached; BrokerDataLostError after data loss. */
  async nack(message: BrokerMessage, reason = 'nacked'): Promise<void> {
    if (this.#lost) throw this.#lost;
    if (!this.#delivery.has(message.id)) return;
    const { keys, subscription, name } = this.#c;
    await this.#command('nack', () =>
      runScript(this.#c.redis, 'sfNack', [keys.stream, keys.ready, keys.dlq], [
        subscription, name, message.id, this.#c.nackRedeliveryDelayMs, this.#c.maxRedeliveries, reason, this.#c.maxDeadLetters,
      ]),
    );
    this.#delivery.settle(message.id);
  }

  /** @throws BrokerDisconnectedError when Redis cannot be reached; BrokerDataLostError after data loss. */
  async deadLetter(message: BrokerMessage, reason: string): Promise<void> {
    if (this.#lost) throw this.#lost;
    if (!this.#delivery.has(message.id)) return;
    const { keys, subscription, name } = this.#c;
    await this.#command('deadLetter', () =>
      runScript(this.#c.redis, 'sfDeadLetter', [keys.stream, keys.ready, keys.dlq], [subscription, name, message.id, reason, this.#c.maxDeadLetters, '0']),
    );
    this.#delivery.settle(message.id);
  }

  /**
   * Stops fetching, hands every entry pending on this consumer (delivered or not yet taken
   * by the application) to the other consumers, releases the lock. Safe twice.
   * @throws BrokerDisconnectedError when the handover could not be written; the entries are
   *   then recovered by the others once this consumer's liveness key expires.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#delivery.close();
    this.#malformed.complete();
    this.#stop();
    this.#poke();
    this.#c.blocking.disconnect();
    await this.#loop;
    const { redis, keys, subscription, name } = this.#c;
    try {
      await this.#command('close', async () => {
        try {
          await runScript(redis, 'sfHandover', [keys.stream, keys.ready, keys.alivePrefix + name], [subscription, name]);
        } catch (err) {
          // The group is gone: nothing is pending to hand over (that loss was reported).
          if (!isDataLoss(err)) throw err;
          await redis.del(keys.alivePrefix + name);
        }
        if (this.#c.type !== 'shared') await this.#releaseLock();
      });
    } finally {
      this.#c.onClose(this);
    }
  }

  /** Wakes the fetch loop (capacity freed, lock taken, close). */
  #poke(): void {
    const w = this.#wake;
    this.#wake = undefined;
    w?.();
  }

  /** Waits for `#poke` or `ms`. */
  #pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#wake = undefined;
        resolve();
      }, ms);
      this.#wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  async #run(): Promise<void> {
    const { timings } = this.#c;
    let failingSince: number | undefined;
    let backoff = 50;
    while (!this.#closed) {
      if (!this.#active || this.#delivery.free === 0) {
        await this.#pause(timings.heartbeatMs);
        continue;
      }
      try {
        // Entries a fetch still reads after close land in this consumer's PEL after its
        // handover; its liveness key is gone by then, so the next reap hands them on.
        await Promise.race([this.#fetch(), this.#stopped]);
        failingSince = undefined;
        backoff = 50;
      } catch (err) {
        if (this.#closed) break;
        if (isDataLoss(err)) {
          // Not recreated: a fresh group would hide that the pending and unread entries are gone.
          this.#dataLost(err);
          break;
        }
        failingSince ??= Date.now();
        if (Date.now() - failingSince > timings.reconnectTimeoutMs) {
          this.#delivery.fail(
            new BrokerDisconnectedError(
              `redis consumer ${this.#c.name} on ${topicName(this.#c.topic)}: no successful fetch for ${timings.reconnectTimeoutMs} ms`,
              { cause: err },
            ),
          );
          break;
        }
        await this.#pause(backoff);
        backoff = Math.min(backoff * 2, 2000);
      }
    }
  }

  /** One round: claim due entries, then read new ones (blocking when nothing was claimed). */
  async #fetch(): Promise<void> {
    const { redis, blocking, keys, subscription, name, timings } = this.#c;
    const locked = this.#c.type === 'exclusive' || this.#c.type === 'failover';
    await this.#bury();
    const reply = (await runScript(redis, 'sfClaimReady', locked ? [keys.stream, keys.ready, keys.lock] : [keys.stream, keys.ready], [subscription, name, this.#delivery.free], true)) as [
      Array<[Buffer, Buffer[], number]>,
      Buffer | null,
      number,
      number,
    ];
    const [claimed, nextDue, dueLeft, held] = reply;
    if (held === 0) {
      // The lock is gone (a pause past the lease, or Redis down longer than it): read nothing
      // more; the heartbeat takes the lock again when it is free.
      this.#active = false;
      return;
    }
    claimed.sort((a, b) => compareIds(a[0].toString(), b[0].toString()));
    for (const [id, fields, count] of claimed) this.#take(id.toString(), fields, count);
    await this.#bury();
    const free = this.#delivery.free;
    // Due entries left in `ready` (a backlog larger than the room) are claimed before any new
    // entry is read, even when a receive freed room meanwhile: per-producer order.
    if (free === 0 || this.#closed || dueLeft === 1) return;
    let block = timings.blockMs;
    if (nextDue) block = Math.max(1, Math.min(block, Number(nextDue.toString()) - Date.now()));
    if (locked) {
      // Read under the lock, atomically; then wait with a plain XREAD, which gives the group nothing.
      const [ok, entries, lastId] = (await runScript(redis, 'sfReadHeld', [keys.stream, keys.lock], [subscription, name, free], true)) as [number, Array<[Buffer, Buffer[]]>, Buffer | null];
      if (ok === 0) {
        this.#active = false;
        return;
      }
      for (const [id, fields] of entries) this.#take(id.toString(), fields, 1);
      await this.#bury();
      if (entries.length === 0 && claimed.length === 0 && lastId) await blocking.callBuffer('XREAD', 'COUNT', 1, 'BLOCK', block, 'STREAMS', keys.stream, lastId.toString());
      return;
    }
    const args: Array<string | number> = ['GROUP', subscription, name, 'COUNT', free];
    if (claimed.length === 0) args.push('BLOCK', block);
    args.push('STREAMS', keys.stream, '>');
    const read = await blocking.callBuffer('XREADGROUP', ...args);
    for (const [id, fields] of streamEntries(read)) this.#take(id.toString(), fields, 1);
    await this.#bury();
  }

  /** Delivers a read or claimed entry, or queues it for the dead-letter stream when it is not a message. */
  #take(id: string, fields: Buffer[], deliveryCount: number): void {
    const d = decodeEntry(this.#c.topic, id, fields, deliveryCount, this.#c.maxPayloadBytes);
    if ('message' in d) this.#delivery.deliver(d.message);
    else this.#toBury.push(d.malformed);
  }

  /**
   * Moves the queued malformed entries to the dead-letter stream (acking them), oldest first,
   * and reports each. One that fails stays queued with those after it.
   * @throws what Redis throws (the fetch loop backs off and retries).
   */
  async #bury(): Promise<void> {
    const { redis, keys, subscription, name, maxDeadLetters } = this.#c;
    while (this.#toBury.length > 0) {
      const dead = this.#toBury[0]!;
      const moved = await runScript(redis, 'sfDeadLetter', [keys.stream, keys.ready, keys.dlq], [
        subscription, name, dead.message.id, dead.reason, maxDeadLetters, '1',
      ]);
      this.#toBury.shift();
      if (moved === 1) this.#malformed.record(dead); // 0: handed over meanwhile, its new owner moves it
    }
  }

  /** Fails the consumer with BrokerDataLostError (once); returns the error. */
  #dataLost(cause: unknown): BrokerDataLostError {
    this.#lost ??= new BrokerDataLostError(
      topicName(this.#c.topic),
      this.#c.subscription,
      `redis stream ${this.#c.keys.stream} or its consumer group is gone (${(cause as Error).message}); entries in flight are lost`,
      { cause },
    );
    if (this.#timer) clearInterval(this.#timer);
    this.#delivery.fail(this.#lost);
    this.#malformed.complete();
    this.#poke();
    return this.#lost;
  }

  /** Heartbeat: liveness, lock, reaping dead consumers, trimming. Errors wait for the next beat. */
  async #beat(): Promise<void> {
    if (this.#beating || this.#closed) return;
    this.#beating = true;
    const { redis, keys, name, timings, type } = this.#c;
    try {
      await redis.set(keys.alivePrefix + name, '1', 'PX', timings.deadAfterMs);
      if (type === 'exclusive' || type === 'failover') {
        if (this.#active) {
          const renewed = await redis.eval(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0",
            1, keys.lock, name, timings.deadAfterMs,
          );
          if (renewed !== 1) this.#active = false; // lost it (e.g. Redis was down longer than deadAfterMs)
        }
        if (!this.#active && (await redis.set(keys.lock, name, 'PX', timings.deadAfterMs, 'NX')) === 'OK') {
          await this.#reap(true);
          this.#active = true;
          this.#poke();
        }
      }
      if (this.#active) {
        await this.#reap();
        await runScript(redis, 'sfTrim', [keys.stream], []);
      }
    } catch (err) {
      // NOGROUP: the group is gone (noticed here when the fetch loop is idle at full capacity).
      // Otherwise Redis is unreachable: the fetch loop reports a lasting outage; the next beat retries.
      if (isDataLoss(err) && !this.#closed) this.#dataLost(err);
    } finally {
      this.#beating = false;
    }
  }

  /**
   * Hands dead consumers' pending entries to `ready` (`sfReap`); `tookLock`: this consumer
   * just took an exclusive or failover lock, so every other consumer's pending entries go,
   * live or not (an earlier holder's: they must come before what this one reads next).
   */
  async #reap(tookLock = false): Promise<void> {
    const { redis, keys, subscription, name } = this.#c;
    await runScript(redis, 'sfReap', [keys.stream, keys.ready], tookLock ? [subscription, keys.alivePrefix, name, '1'] : [subscription, keys.alivePrefix]);
  }

  async #releaseLock(): Promise<void> {
    const { redis, keys, name } = this.#c;
    await redis.eval("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0", 1, keys.lock, name);
  }

  /**
   * Runs one command, mapping NOGROUP to BrokerDataLostError (and failing the consumer) and
   * connection failures to BrokerDisconnectedError.
   */
  async #command<T>(what: string, f: () => Promise<T>): Promise<T> {
    if (this.#closed && what !== 'close') throw new BrokerClosedError(`consumer ${this.#c.name} is closed`);
    if (this.#lost && what !== 'close') throw this.#lost;
    try {
      return await f();
    } catch (err) {
      if (isDataLoss(err) && what !== 'close') throw this.#dataLost(err);
      throw new BrokerDisconnectedError(`redis ${what} on ${topicName(this.#c.topic)} failed: ${(err as Error).message}`, { cause: err });
    }
  }
}
