import { Observable, type Subscription } from 'rxjs';
import { BrokerClosedError, InvalidArgumentError, UndecodableMessageError } from '../../../errors.js';
import { sequence as toSequence, type Sequence } from '../../ids.js';
import type { BrokerMessage, Consumer, DeadLetter, Producer, SendOptions } from '../broker.js';
import { MalformedLog } from '../internal/malformed.js';
import { mergeMalformed, receiveSkipping, rejectUndecodable, type Interceptor } from './compose.js';

/** Options of `batching`. A batch is sent when any limit is reached. */
export interface BatchingOptions {
  /** Most messages per batch. Default 100. */
  readonly maxMessages?: number;
  /** Most payload bytes per batch (a single larger message goes alone). Default 128 KiB. */
  readonly maxBytes?: number;
  /** Longest a message waits for its batch to fill, ms. Default 10. */
  readonly maxDelayMs?: number;
}

/** First byte of a batch envelope ("B"). */
const MAGIC = 0x42;
/** Envelope header: magic (1), version (1), count (4). Per item: sequence (8, float64), length (4). */
const HEADER = 6;
const ITEM_HEADER = 12;

/**
 * Batching as an interceptor pair (see `compose.ts`): the producer side packs many sends into
 * one broker message; the consumer side unpacks it into the original messages.
 *
 * Envelope: `0x42 0x01 count:u32be` then per item `sequence:f64be length:u32be bytes`. The
 * broker message carries the batch's last sequence, so exactly-once marks keyed on the
 * highest applied sequence stay correct; each unpacked message has its own sequence and the
 * id `<broker id>#<index>`.
 *
 * Producer: `send` resolves when its batch is on the broker. All messages of a batch share
 * one key: a send with another key first sends the open batch. Order per producer is kept
 * (batches go out one at a time, in order).
 *
 * Consumer: a batch is acked when all its messages are acked. Nack and dead letter act on
 * the whole batch (a broker redelivers or dead-letters messages, not parts of them): the
 * first nack or dead letter of one of its messages applies to the batch and later calls for
 * its other messages are ignored, so at-least-once holds and consumers skip what they
 * already applied by sequence. A broker message that is not a well-formed envelope
 * (truncated, wrong magic or version, a bad item) is dead-lettered alone with reason
 * `undecodable batch envelope: ...` and reported on `malformed$`; the others are delivered.
 * @throws InvalidArgumentError for limits that are not positive integers.
 */
export function batching(options: BatchingOptions = {}): Interceptor {
  const limits = {
    maxMessages: options.maxMessages ?? 100,
    maxBytes: options.maxBytes ?? 128 * 1024,
    maxDelayMs: options.maxDelayMs ?? 10,
  };
  for (const [k, v] of Object.entries(limits)) {
    if (!Number.isInteger(v) || v < (k === 'maxDelayMs' ? 0 : 1)) throw new InvalidArgumentError(`${k} must be a positive integer, got ${v}`);
  }
  return {
    producer: (next) => new BatchingProducer(next, limits),
    consumer: (next) => new UnbatchingConsumer(next),
  };
}

interface Item {
  readonly payload: Uint8Array;
  readonly sequence: Sequence;
  readonly resolve: () => void;
  readonly reject: (e: unknown) => void;
}

class BatchingProducer implements Producer {
  readonly topic;
  readonly producer;
  readonly #next: Producer;
  readonly #limits: Required<BatchingOptions>;
  /** The open batch and its key. */
  #items: Item[] = [];
  #bytes = 0;
  #key: string | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** Sends of earlier batches, chained so batches leave in order. */
  #tail: Promise<void> = Promise.resolve();
  #seq = 0;
  #closed = false;

  constructor(next: Producer, limits: Required<BatchingOptions>) {
    this.#next = next;
    this.#limits = limits;
    this.topic = next.topic;
    this.producer = next.producer;
  }

  send(payload: Uint8Array, options?: SendOptions): Promise<void> {
    if (this.#closed) return Promise.reject(new BrokerClosedError(`batching producer ${this.producer} is closed`));
    const seq = options?.sequence ?? toSequence(this.#seq);
    this.#seq = Math.max(this.#seq, seq + 1);
    if (this.#items.length > 0 && (options?.key !== this.#key || this.#bytes + payload.byteLength > this.#limits.maxBytes)) this.#emit();
    const done = new Promise<void>((resolve, reject) => {
      this.#items.push({ payload: Uint8Array.prototype.slice.call(payload), sequence: seq, resolve, reject });
    });
    this.#key = options?.key;
    this.#bytes += payload.byteLength;
    if (this.#items.length >= this.#limits.maxMessages || this.#bytes >= this.#limits.maxBytes) this.#emit();
    else this.#timer ??= setTimeout(() => this.#emit(), this.#limits.maxDelayMs);
    return done;
  }

  /** Sends the open batch, then waits for every batch sent so far. */
  async flush(): Promise<void> {
    this.#emit();
    await this.#tail;
    await this.#next.flush();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    await this.flush();
    this.#closed = true;
    await this.#next.close();
  }

  /** Closes the open batch and queues its send behind earlier ones. */
  #emit(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    const items = this.#items;
    const key = this.#key;
    this.#items = [];
    this.#bytes = 0;
    if (items.length === 0) return;
    const envelope = pack(items);
    const last = items[items.length - 1]!.sequence;
    this.#tail = this.#tail.then(async () => {
      try {
        await this.#next.send(envelope, { sequence: last, ...(key !== undefined ? { key } : {}) });
        for (const i of items) i.resolve();
      } catch (err) {
        for (const i of items) i.reject(err);
      }
    });
  }
}

function pack(items: Item[]): Uint8Array {
  let size = HEADER;
  for (const i of items) size += ITEM_HEADER + i.payload.byteLength;
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  out[0] = MAGIC;
  out[1] = 1;
  view.setUint32(2, items.length);
  let at = HEADER;
  for (const i of items) {
    view.setFloat64(at, i.sequence);
    view.setUint32(at + 8, i.payload.byteLength);
    out.set(i.payload, at + ITEM_HEADER);
    at += ITEM_HEADER + i.payload.byteLength;
  }
  return out;
}

/**
 * The messages inside a batch envelope.
 * @throws UndecodableMessageError when `payload` is not a well-formed version-1 envelope:
 *   short or wrong header, 0 items, an item cut short (truncated), a sequence that is not a
 *   non-negative safe integer, or bytes after the last item.
 */
export function unpack(payload: Uint8Array): Array<{ sequence: Sequence; payload: Uint8Array }> {
  if (payload.byteLength < HEADER || payload[0] !== MAGIC || payload[1] !== 1) throw new UndecodableMessageError('not a batch envelope (v1)');
  const view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  const count = view.getUint32(2);
  if (count === 0) throw new UndecodableMessageError('empty batch envelope (0 items)');
  const out: Array<{ sequence: Sequence; payload: Uint8Array }> = [];
  let at = HEADER;
  for (let n = 0; n < count; n++) {
    if (at + ITEM_HEADER > payload.byteLength) throw new UndecodableMessageError(`batch envelope truncated at item ${n} of ${count}`);
    const seq = view.getFloat64(at);
    const len = view.getUint32(at + 8);
    if (!Number.isSafeInteger(seq) || seq < 0 || at + ITEM_HEADER + len > payload.byteLength) {
      throw new UndecodableMessageError(`batch envelope item ${n} is malformed`);
    }
    out.push({ sequence: seq as Sequence, payload: payload.subarray(at + ITEM_HEADER, at + ITEM_HEADER + len) });
    at += ITEM_HEADER + len;
  }
  if (at !== payload.byteLength) throw new UndecodableMessageError(`batch envelope has ${payload.byteLength - at} bytes after its ${count} items`);
  return out;
}

/** A delivered batch: the broker message and how many of its messages are still unacked. */
interface OpenBatch {
  readonly inner: BrokerMessage;
  left: number;
  failed: boolean;
}

class UnbatchingConsumer implements Consumer {
  readonly messages$: Observable<BrokerMessage>;
  readonly malformed$: Observable<DeadLetter>;
  readonly #inner: Consumer;
  readonly #log = new MalformedLog('batch envelope check of a consumer');
  /** Batches by broker message id. */
  readonly #batches = new Map<string, OpenBatch>();
  /** Unpacked messages not yet returned by `receive`. */
  #buffer: BrokerMessage[] = [];

  constructor(inner: Consumer) {
    this.#inner = inner;
    this.malformed$ = mergeMalformed(inner, this.#log);
    this.messages$ = new Observable<BrokerMessage>((subscriber) => {
      const s: Subscription = inner.messages$.subscribe({
        next: (m) => {
          let parts: BrokerMessage[];
          try {
            parts = this.#open(m);
          } catch (err) {
            void this.#reject(m, err);
            return;
          }
          for (const p of parts) subscriber.next(p);
        },
        error: (e) => subscriber.error(e),
        complete: () => subscriber.complete(),
      });
      return () => s.unsubscribe();
    });
  }

  /** Unpacked messages; a delivered payload that is not a batch is dead-lettered (see the class doc). */
  async receive(max: number, timeoutMs?: number): Promise<BrokerMessage[]> {
    if (this.#buffer.length === 0) {
      await receiveSkipping(this.#inner, max, timeoutMs, async (ms) => {
        for (const m of ms) {
          try {
            this.#buffer.push(...this.#open(m));
          } catch (err) {
            await this.#reject(m, err);
          }
        }
        return this.#buffer;
      });
    }
    return this.#buffer.splice(0, max);
  }

  async ack(m: BrokerMessage): Promise<void> {
    const b = this.#batchOf(m);
    if (!b || b.failed) return;
    if (--b.left === 0) {
      this.#batches.delete(b.inner.id);
      await this.#inner.ack(b.inner);
    }
  }

  async nack(m: BrokerMessage, reason?: string): Promise<void> {
    const b = this.#fail(m);
    if (b) await this.#inner.nack(b.inner, reason);
  }

  async deadLetter(m: BrokerMessage, reason: string): Promise<void> {
    const b = this.#fail(m);
    if (b) await this.#inner.deadLetter(b.inner, reason);
  }

  async close(): Promise<void> {
    this.#batches.clear();
    this.#buffer = [];
    this.#log.complete();
    await this.#inner.close();
  }

  #reject(m: BrokerMessage, err: unknown): Promise<void> {
    return rejectUndecodable(this.#inner, this.#log, 'undecodable batch envelope', m, err);
  }

  #open(m: BrokerMessage): BrokerMessage[] {
    const items = unpack(m.payload);
    this.#batches.set(m.id, { inner: m, left: items.length, failed: false });
    return items.map((it, i) => ({ ...m, id: `${m.id}#${i}`, payload: it.payload, sequence: toSequence(it.sequence) }));
  }

  #batchOf(m: BrokerMessage): OpenBatch | undefined {
    const hash = m.id.lastIndexOf('#');
    return hash < 0 ? undefined : this.#batches.get(m.id.slice(0, hash));
  }

  /** Marks the batch of `m` failed; returns it the first time only. */
  #fail(m: BrokerMessage): OpenBatch | undefined {
    const b = this.#batchOf(m);
    if (!b || b.failed) return undefined;
    b.failed = true;
    this.#batches.delete(b.inner.id);
    return b;
  }
}
