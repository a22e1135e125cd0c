import type { Observable } from 'rxjs';
import { BrokerClosedError, InvalidArgumentError } from '../../errors.js';
import { sequence as toSequence, type ProducerId, type Sequence } from '../ids.js';
import { topicName, type Topic } from '../topics.js';
import type { BrokerIdentity } from './identity.js';
import { Delivery } from './internal/delivery.js';
import {
  DEFAULT_MAX_DEAD_LETTERS, DEFAULT_MAX_PAYLOAD_BYTES, entryProblem, MalformedLog, checkSendSize, parseSequence, positiveInteger, type RawFields,
} from './internal/malformed.js';
import type {
  Broker, BrokerMessage, Consumer, DeadLetter, Producer, ProducerOptions, SendOptions, SubscribeOptions, SubscriptionType,
} from './broker.js';

/**
 * The embedded broker: topics, subscriptions, acks, redelivery and dead letters in one
 * process's memory, with the semantics of the Pulsar and Redis Streams brokers (see
 * `broker.ts`). Payloads are copied on send, so what crosses it is bytes, as on a wire.
 *
 * Retention: a message is dropped once every subscription that existed when it was sent
 * has acked it; a subscription created later starts at the earliest retained message.
 * Not durable: a process crash loses everything in it (use Redis or Pulsar for that).
 *
 * Dead letters: at most `maxDeadLetters` per subscription, the oldest dropped first.
 * Malformed entries can only come in through `appendRaw` (our producers write none); they are
 * dead-lettered as on the other brokers.
 */
export class MemoryBroker implements Broker {
  readonly kind = 'memory';

  /** The largest payload a send accepts, in bytes (see `Broker.maxPayloadBytes`). */
  get maxPayloadBytes(): number {
    return this.#limits.maxPayloadBytes;
  }
  /** `{ kind: 'memory' }`: no address, no scope; nothing of it outlives the process. */
  readonly identity: BrokerIdentity = Object.freeze({ kind: 'memory' });
  readonly #topics = new Map<string, MemoryTopic>();
  readonly #consumers = new Set<MemoryConsumer>();
  readonly #limits: MemoryLimits;
  #closed = false;

  /** @throws InvalidArgumentError when a limit is not an integer >= 1. */
  constructor(options: MemoryBrokerOptions = {}) {
    this.#limits = {
      maxPayloadBytes: positiveInteger('maxPayloadBytes', options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES),
      maxDeadLetters: positiveInteger('maxDeadLetters', options.maxDeadLetters ?? DEFAULT_MAX_DEAD_LETTERS),
      maxRetainedPerTopic: positiveInteger('maxRetainedPerTopic', options.maxRetainedPerTopic ?? DEFAULT_MAX_RETAINED_PER_TOPIC),
    };
  }

  /** A producer on `topic`. @throws BrokerClosedError after `close()`. */
  async producer(topic: Topic, options: ProducerOptions): Promise<Producer> {
    this.#assertOpen();
    return new MemoryProducer(this.#topic(topic), topic, options.producer, () => this.#closed, this.#limits.maxPayloadBytes);
  }

  /**
   * Test hook: appends an entry with the given fields as a foreign producer could write it on
   * a wire broker (a Redis `XADD` or a Pulsar produce with properties of its choice): any
   * field may be absent, the sequence is text. An entry whose fields do not make a message
   * (see `internal/malformed.ts`) is dead-lettered by each subscription that reaches it; a
   * well-formed one is delivered like a sent message. Payload bytes are copied.
   * @throws BrokerClosedError after `close()`.
   */
  appendRaw(topic: Topic, fields: RawFields & { readonly key?: string }): void {
    this.#assertOpen();
    const problem = entryProblem(fields, this.#limits.maxPayloadBytes, { payload: 'payload', producer: 'producer', sequence: 'sequence' });
    const seq = fields.sequence === undefined ? undefined : parseSequence(fields.sequence);
    this.#topic(topic).append({
      payload: fields.payload ? Uint8Array.prototype.slice.call(fields.payload) : new Uint8Array(0),
      producer: (fields.producer || '?') as ProducerId,
      sequence: seq ?? toSequence(0),
      ...(fields.key !== undefined ? { key: fields.key } : {}),
      publishTime: Date.now(),
      ...(problem !== undefined ? { problem } : {}),
    });
  }

  /** @throws InvalidArgumentError on a second consumer of an exclusive subscription or a type change. */
  async subscribe(topic: Topic, options: SubscribeOptions): Promise<Consumer> {
    this.#assertOpen();
    const t = this.#topic(topic);
    let sub = t.subscriptions.get(options.subscription);
    if (!sub) {
      sub = new MemorySubscription(t, options.subscription, options.type);
      t.subscriptions.set(options.subscription, sub);
    } else if (sub.type !== options.type) {
      throw new InvalidArgumentError(`subscription ${options.subscription} on ${topicName(topic)} is ${sub.type}, not ${options.type}`);
    }
    if (sub.type === 'exclusive' && sub.consumers.length > 0) {
      throw new InvalidArgumentError(`exclusive subscription ${options.subscription} on ${topicName(topic)} already has a consumer`);
    }
    const consumer = new MemoryConsumer(sub, topic, options, (c) => this.#consumers.delete(c));
    this.#consumers.add(consumer);
    sub.consumers.push(consumer);
    sub.schedule();
    return consumer;
  }

  async deadLetters(topic: Topic, subscription: string): Promise<DeadLetter[]> {
    return [...(this.#topics.get(topicName(topic))?.subscriptions.get(subscription)?.deadLetters ?? [])];
  }

  /** Messages retained on `topic` (sent and not yet acked by every subscription). */
  backlog(topic: Topic): number {
    return this.#topics.get(topicName(topic))?.retained ?? 0;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([...this.#consumers].map((c) => c.close()));
    for (const t of this.#topics.values()) for (const s of t.subscriptions.values()) s.dispose();
  }

  #topic(topic: Topic): MemoryTopic {
    const name = topicName(topic);
    let t = this.#topics.get(name);
    if (!t) {
      t = new MemoryTopic(topic, this.#limits);
      this.#topics.set(name, t);
    }
    return t;
  }

  #assertOpen(): void {
    if (this.#closed) throw new BrokerClosedError('memory broker is closed');
  }
}

/** Options of `new MemoryBroker`. */
export interface MemoryBrokerOptions {
  /**
   * Longest payload in bytes: a longer `send` throws InvalidArgumentError, a longer raw entry
   * is dead-lettered. Default 5 MiB (`DEFAULT_MAX_PAYLOAD_BYTES`, Pulsar's default).
   */
  readonly maxPayloadBytes?: number;
  /** Dead letters kept per subscription; the oldest go first. Default 10 000. */
  readonly maxDeadLetters?: number;
  /**
   * Backpressure on producers: a `send` to a topic that retains this many messages (sent and
   * not yet acked by every subscription) waits until its consumers bring it below, as long as
   * some subscription of the topic has a consumer connected (with none, nothing could drain
   * it, so sends go on). Without it an awaited send loop never lets the consumers run: every
   * send resolves at once. After Pulsar's backlog quota with the `producer_request_hold`
   * policy. Default 10 000 (`DEFAULT_MAX_RETAINED_PER_TOPIC`).
   */
  readonly maxRetainedPerTopic?: number;
}

/** Default `MemoryBrokerOptions.maxRetainedPerTopic`. */
export const DEFAULT_MAX_RETAINED_PER_TOPIC = 10_000;

type MemoryLimits = Required<MemoryBrokerOptions>;

/** One retained message. `offset` is its position in the topic, never reused. */
interface Entry {
  readonly offset: number;
  readonly payload: Uint8Array;
  readonly producer: ProducerId;
  readonly sequence: Sequence;
  readonly key?: string;
  readonly publishTime: number;
  /** Why the entry is not a message (raw entries only); producer and sequence are then placeholders. */
  readonly problem?: string;
}

class MemoryTopic {
  /**
   * Retained entries from `#head` on: `log[#head + i].offset === base + i`. Dropped entries
   * are cleared to undefined (their payloads freed) and cut off the front only once they are
   * half the array, so dropping costs O(1) per entry, not a copy of the log.
   */
  #log: Array<Entry | undefined> = [];
  #head = 0;
  /** Offset of the oldest retained entry. */
  base = 0;
  next = 0;
  readonly subscriptions = new Map<string, MemorySubscription>();
  constructor(readonly topic: Topic, readonly limits: MemoryLimits) {}

  /** Entries retained (sent and not yet acked by every subscription). */
  get retained(): number {
    return this.#log.length - this.#head;
  }

  append(entry: Omit<Entry, 'offset'>): void {
    this.#log.push({ ...entry, offset: this.next++ });
    for (const s of this.subscriptions.values()) s.schedule();
  }

  /** Producers waiting for room (see `MemoryBrokerOptions.maxRetainedPerTopic`). */
  #waiting: Array<() => void> = [];

  /** Whether a send must wait: the topic is full and a connected consumer can drain it. */
  full(): boolean {
    if (this.retained < this.limits.maxRetainedPerTopic) return false;
    for (const s of this.subscriptions.values()) if (s.consumers.length > 0) return true;
    return false;
  }

  /** Resolves once `full()` may have changed (entries dropped, a consumer left). */
  room(): Promise<void> {
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  /** Wakes the waiting producers, which check `full()` again. */
  wake(): void {
    if (this.#waiting.length === 0) return;
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const w of waiting) w();
  }

  entry(offset: number): Entry | undefined {
    const i = offset - this.base;
    return i >= 0 ? this.#log[this.#head + i] : undefined;
  }

  /** Drops the prefix that every subscription has acked (once it is over 1024 entries, or all of them). */
  trim(): void {
    let low = this.next;
    for (const s of this.subscriptions.values()) low = Math.min(low, s.lowWatermark());
    const drop = low - this.base;
    if (drop > 1024 || (drop > 0 && drop === this.retained)) {
      const log = this.#log;
      for (let i = this.#head; i < this.#head + drop; i++) log[i] = undefined;
      this.#head += drop;
      this.base = low;
      if (this.#head === log.length) {
        this.#log = [];
        this.#head = 0;
      } else if (this.#head * 2 >= log.length) {
        this.#log = log.slice(this.#head);
        this.#head = 0;
      }
      this.wake();
    }
  }
}

/** A delivery in flight: which consumer has the entry and how often it was redelivered. */
interface InFlight {
  readonly entry: Entry;
  readonly redeliveryCount: number;
  consumer: MemoryConsumer | undefined;
}

class MemorySubscription {
  readonly consumers: MemoryConsumer[] = [];
  readonly deadLetters: DeadLetter[] = [];
  /** Next offset never delivered yet. */
  cursor: number;
  /** Offsets delivered (or waiting for redelivery) and not acked. */
  readonly pending = new Map<number, InFlight>();
  /**
   * Every offset ever put in `pending`, ascending (an offset enters `pending` once, when first
   * delivered; redeliveries replace its value under the same key), from `#orderHead` on; acked
   * ones are dropped from the front lazily by `lowWatermark`. Each offset is pushed and passed
   * once, so an ack costs O(1) amortized instead of a scan of every unacked message.
   */
  #order: number[] = [];
  #orderHead = 0;
  /** Ready for redelivery, in offset order. */
  redeliver: InFlight[] = [];
  readonly #timers = new Set<NodeJS.Timeout>();
  #scheduled = false;
  #roundRobin = 0;

  constructor(readonly topic: MemoryTopic, readonly name: string, readonly type: SubscriptionType) {
    this.cursor = topic.base;
  }

  /** The lowest offset not acked: the oldest pending one, else the cursor. O(1) amortized. */
  lowWatermark(): number {
    const order = this.#order;
    let head = this.#orderHead;
    while (head < order.length && !this.pending.has(order[head]!)) head++;
    if (head >= 1024 && head * 2 >= order.length) {
      this.#order = order.slice(head);
      head = 0;
    }
    this.#orderHead = head;
    return head < this.#order.length ? this.#order[head]! : this.cursor;
  }

  /** Dispatch on a microtask so that `ack` inside a `next` handler never re-enters it. */
  schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    queueMicrotask(() => {
      this.#scheduled = false;
      this.#dispatch();
    });
  }

  #dispatch(): void {
    for (;;) {
      const next = this.redeliver[0] ?? this.#fresh();
      if (!next) return;
      const problem = next.entry.problem;
      if (problem !== undefined && next !== this.redeliver[0]) {
        // Malformed: never delivered; dead-lettered alone, reported by a consumer of the subscription.
        const reporter = this.consumers[0];
        if (!reporter) return;
        this.cursor++;
        const dead: DeadLetter = { message: toMessage(this.topic.topic, next), reason: problem, malformed: true };
        this.#bury(dead);
        this.topic.trim();
        reporter.reportMalformed(dead);
        continue;
      }
      const consumer = this.#pick(next.entry);
      if (!consumer) return;
      if (next === this.redeliver[0]) this.redeliver.shift();
      else {
        this.cursor++;
        this.#order.push(next.entry.offset);
      }
      next.consumer = consumer;
      this.pending.set(next.entry.offset, next);
      consumer.deliver(next);
    }
  }

  #fresh(): InFlight | undefined {
    const entry = this.topic.entry(this.cursor);
    return entry ? { entry, redeliveryCount: 0, consumer: undefined } : undefined;
  }

  #pick(entry: Entry): MemoryConsumer | undefined {
    const n = this.consumers.length;
    if (n === 0) return undefined;
    if (this.type === 'exclusive' || this.type === 'failover') {
      const active = this.consumers[0]!;
      return active.hasCapacity() ? active : undefined;
    }
    if (this.type === 'key_shared' && entry.key !== undefined) {
      let h = 0;
      for (let i = 0; i < entry.key.length; i++) h = (Math.imul(h, 31) + entry.key.charCodeAt(i)) >>> 0;
      const c = this.consumers[h % n]!;
      return c.hasCapacity() ? c : undefined;
    }
    for (let i = 0; i < n; i++) {
      const c = this.consumers[(this.#roundRobin + i) % n]!;
      if (c.hasCapacity()) {
        this.#roundRobin = (this.#roundRobin + i + 1) % n;
        return c;
      }
    }
    return undefined;
  }

  ack(consumer: MemoryConsumer, offset: number): boolean {
    const f = this.pending.get(offset);
    if (!f || f.consumer !== consumer) return false; // stale ack after a handover: ignored
    this.pending.delete(offset);
    this.topic.trim();
    this.schedule();
    return true;
  }

  nack(consumer: MemoryConsumer, offset: number, reason: string, delayMs: number, maxRedeliveries: number | undefined): boolean {
    const f = this.pending.get(offset);
    if (!f || f.consumer !== consumer) return false;
    const again: InFlight = { entry: f.entry, redeliveryCount: f.redeliveryCount + 1, consumer: undefined };
    if (maxRedeliveries !== undefined && again.redeliveryCount > maxRedeliveries) {
      this.pending.delete(offset);
      this.#bury({ message: toMessage(this.topic.topic, f), reason });
      this.topic.trim();
      this.schedule();
      return true;
    }
    f.consumer = undefined; // parked: counts as pending so retention keeps it
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      if (this.pending.get(offset) !== f) return;
      this.pending.set(offset, again);
      this.#requeue([again]);
    }, delayMs);
    this.#timers.add(timer);
    return true;
  }

  deadLetter(consumer: MemoryConsumer, offset: number, reason: string): boolean {
    const f = this.pending.get(offset);
    if (!f || f.consumer !== consumer) return false;
    this.pending.delete(offset);
    this.#bury({ message: toMessage(this.topic.topic, f), reason });
    this.topic.trim();
    this.schedule();
    return true;
  }

  /** Adds a dead letter, dropping the oldest beyond `maxDeadLetters`. */
  #bury(dead: DeadLetter): void {
    this.deadLetters.push(dead);
    const over = this.deadLetters.length - this.topic.limits.maxDeadLetters;
    if (over > 0) this.deadLetters.splice(0, over);
  }

  /** A consumer left: its unacked messages go back for redelivery, oldest first. */
  leave(consumer: MemoryConsumer): void {
    const i = this.consumers.indexOf(consumer);
    if (i >= 0) this.consumers.splice(i, 1);
    if (this.consumers.length === 0) this.topic.wake(); // senders held for this consumer go on
    const back: InFlight[] = [];
    for (const [offset, f] of this.pending) {
      if (f.consumer === consumer) {
        const again = { entry: f.entry, redeliveryCount: f.redeliveryCount + 1, consumer: undefined };
        this.pending.set(offset, again);
        back.push(again);
      }
    }
    this.#requeue(back);
  }

  #requeue(items: InFlight[]): void {
    if (items.length === 0) return;
    this.redeliver = [...this.redeliver, ...items].sort((a, b) => a.entry.offset - b.entry.offset);
    this.schedule();
  }

  dispose(): void {
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
  }
}

function toMessage(topic: Topic, f: InFlight): BrokerMessage {
  const e = f.entry;
  return {
    id: String(e.offset),
    topic,
    payload: e.payload,
    producer: e.producer,
    sequence: e.sequence,
    ...(e.key !== undefined ? { key: e.key } : {}),
    redeliveryCount: f.redeliveryCount,
    publishTime: e.publishTime,
  };
}

class MemoryProducer implements Producer {
  #next = 0;
  #closed = false;
  constructor(
    readonly t: MemoryTopic,
    readonly topic: Topic,
    readonly producer: ProducerId,
    readonly brokerClosed: () => boolean,
    readonly maxPayloadBytes: number,
  ) {}

  /**
   * Appends the message; waits first while the topic is full (`maxRetainedPerTopic`).
   * @throws BrokerClosedError; InvalidArgumentError for a payload over `maxPayloadBytes`.
   */
  async send(payload: Uint8Array, options?: SendOptions): Promise<void> {
    if (this.#closed || this.brokerClosed()) throw new BrokerClosedError(`producer ${this.producer} on ${topicName(this.topic)} is closed`);
    checkSendSize(this.topic, payload.byteLength, this.maxPayloadBytes);
    while (this.t.full()) {
      await this.t.room();
      if (this.#closed || this.brokerClosed()) throw new BrokerClosedError(`producer ${this.producer} on ${topicName(this.topic)} is closed`);
    }
    const seq = options?.sequence ?? toSequence(this.#next);
    this.#next = Math.max(this.#next, seq + 1);
    this.t.append({
      payload: Uint8Array.prototype.slice.call(payload),
      producer: this.producer,
      sequence: seq,
      ...(options?.key !== undefined ? { key: options.key } : {}),
      publishTime: Date.now(),
    });
  }

  async flush(): Promise<void> {}

  async close(): Promise<void> {
    this.#closed = true;
    this.t.wake(); // a send held for room ends with BrokerClosedError
  }
}

class MemoryConsumer implements Consumer {
  readonly messages$: Observable<BrokerMessage>;
  readonly #delayMs: number;
  readonly #maxRedeliveries: number | undefined;
  /** What was delivered here and not settled, push or pull: the bookkeeping every broker shares. */
  readonly #delivery: Delivery;
  readonly #malformed: MalformedLog;

  constructor(
    readonly sub: MemorySubscription,
    readonly topic: Topic,
    options: SubscribeOptions,
    readonly onClose: (c: MemoryConsumer) => void,
  ) {
    this.#delayMs = options.nackRedeliveryDelayMs ?? 1000;
    this.#maxRedeliveries = options.maxRedeliveries;
    this.#delivery = new Delivery(options.receiverQueueSize ?? 1000);
    this.messages$ = this.#delivery.messages$;
    this.#malformed = new MalformedLog(`memory consumer of ${options.subscription} on ${topicName(topic)}`);
  }

  get malformed$(): Observable<DeadLetter> {
    return this.#malformed.malformed$;
  }

  /** Called by the subscription after it dead-lettered a malformed entry. */
  reportMalformed(dead: DeadLetter): void {
    this.#malformed.record(dead);
  }

  hasCapacity(): boolean {
    return this.#delivery.free > 0;
  }

  deliver(f: InFlight): void {
    this.#delivery.deliver(toMessage(this.topic, f));
  }

  receive(max: number, timeoutMs?: number): Promise<BrokerMessage[]> {
    return this.#delivery.receive(max, timeoutMs);
  }

  async ack(message: BrokerMessage): Promise<void> {
    if (this.sub.ack(this, Number(message.id))) this.#delivery.settle(message.id);
  }

  async nack(message: BrokerMessage, reason = 'nacked'): Promise<void> {
    if (this.sub.nack(this, Number(message.id), reason, this.#delayMs, this.#maxRedeliveries)) this.#delivery.settle(message.id);
  }

  async deadLetter(message: BrokerMessage, reason: string): Promise<void> {
    if (this.sub.deadLetter(this, Number(message.id), reason)) this.#delivery.settle(message.id);
  }

  async close(): Promise<void> {
    if (this.#delivery.closed) return;
    this.#delivery.close();
    this.#malformed.complete();
    this.sub.leave(this);
    this.onClose(this);
  }
}
