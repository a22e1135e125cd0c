import { Observable, type Subscriber } from 'rxjs';
import { BrokerClosedError, InvalidArgumentError } from '../../../errors.js';
import type { BrokerMessage } from '../broker.js';

/**
 * The consumer-side bookkeeping that every broker shares (memory, Redis Streams, Pulsar): what
 * was delivered to this consumer and not settled yet, push (`messages$`) versus pull
 * (`receive`) hand-off, the unacked bound, and completion on close. Broker files only move
 * messages on their wire and call `deliver` / `settle`.
 *
 * Counting: a message counts against `capacity` from `deliver` until `settle` (ack, nack or
 * dead letter), whether or not the application has taken it from the buffer yet, so the
 * bound holds for push and pull alike. `settle` of an id that is not in flight (a second
 * ack, an ack after a handover) returns false and changes nothing.
 *
 * Re-entrancy: `deliver` may be called from inside a `messages$` subscriber's `next`
 * (through an ack that triggers a fetch); items are pushed one at a time and the buffer is
 * copied before it is drained on subscribe, so a nested call only appends.
 */
export class Delivery {
  readonly messages$: Observable<BrokerMessage>;
  readonly #capacity: number;
  /** Ids delivered to this consumer and not settled. */
  readonly #inFlight = new Set<string>();
  /** Delivered, not yet taken by the application (no push subscriber). */
  #buffer: BrokerMessage[] = [];
  #subscriber: Subscriber<BrokerMessage> | undefined;
  /** Pending `receive` calls, oldest first. */
  #waiters: Array<() => void> = [];
  /** Called whenever capacity frees up (a settle), so the fetch loop can go on. */
  readonly #onCapacity: () => void;
  #closed = false;
  #failure: Error | undefined;

  /**
   * @param capacity most unsettled messages (the `receiverQueueSize`), >= 1.
   * @param onCapacity called (synchronously) after every successful `settle`.
   * @throws InvalidArgumentError when `capacity` is not an integer >= 1.
   */
  constructor(capacity: number, onCapacity: () => void = () => {}) {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new InvalidArgumentError(`receiverQueueSize must be an integer >= 1, got ${capacity}`);
    }
    this.#capacity = capacity;
    this.#onCapacity = onCapacity;
    this.messages$ = new Observable<BrokerMessage>((subscriber) => {
      if (this.#subscriber) {
        subscriber.error(new InvalidArgumentError('messages$ already has a subscriber'));
        return;
      }
      if (this.#failure) {
        subscriber.error(this.#failure);
        return;
      }
      if (this.#closed) {
        subscriber.complete();
        return;
      }
      this.#subscriber = subscriber;
      const buffered = this.#buffer;
      this.#buffer = [];
      for (const m of buffered) subscriber.next(m);
      return () => {
        if (this.#subscriber === subscriber) this.#subscriber = undefined;
      };
    });
  }

  /** Messages that may still be delivered before the bound is reached (>= 0). */
  get free(): number {
    return this.#closed ? 0 : Math.max(0, this.#capacity - this.#inFlight.size);
  }

  /** Delivered and not settled. */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** True when `id` was delivered here and is not settled. */
  has(id: string): boolean {
    return this.#inFlight.has(id);
  }

  /** Hands one message to the application (push) or the buffer (pull). Ignored after close. */
  deliver(m: BrokerMessage): void {
    if (this.#closed) return;
    this.#inFlight.add(m.id);
    if (this.#subscriber) {
      this.#subscriber.next(m);
      return;
    }
    this.#buffer.push(m);
    const w = this.#waiters.shift();
    w?.();
  }

  /** Marks `id` acked, nacked or dead-lettered. @returns false when it was not in flight. */
  settle(id: string): boolean {
    if (!this.#inFlight.delete(id)) return false;
    this.#onCapacity();
    return true;
  }

  /**
   * Pull: resolves with 1 to `max` buffered messages as soon as there is one, or `[]` after
   * `timeoutMs` (ms; undefined = wait until a message or close).
   * @throws BrokerClosedError when the consumer is closed; the failure after `fail`.
   */
  async receive(max: number, timeoutMs?: number): Promise<BrokerMessage[]> {
    if (this.#failure) throw this.#failure;
    if (this.#closed) throw new BrokerClosedError('consumer is closed');
    if (!Number.isInteger(max) || max < 1) throw new InvalidArgumentError(`receive(max) needs an integer >= 1, got ${max}`);
    if (this.#buffer.length === 0) {
      await new Promise<void>((resolve) => {
        let timer: NodeJS.Timeout | undefined;
        const wake = (): void => {
          if (timer) clearTimeout(timer);
          resolve();
        };
        this.#waiters.push(wake);
        if (timeoutMs !== undefined) {
          timer = setTimeout(() => {
            this.#waiters = this.#waiters.filter((w) => w !== wake);
            resolve();
          }, timeoutMs);
        }
      });
      if (this.#failure) throw this.#failure;
    }
    const out = this.#buffer.splice(0, max);
    // Another waiter may have been woken for the same message: pass the turn on.
    if (this.#buffer.length > 0) this.#waiters.shift()?.();
    return out;
  }

  /** Ids delivered and not settled (what a closing consumer hands back). */
  unsettled(): string[] {
    return [...this.#inFlight];
  }

  /** Completes `messages$`, wakes pending `receive` calls with `[]`, drops the buffer. Safe twice. */
  close(): void {
    this.#end(undefined);
  }

  /** Errors `messages$` and pending `receive` calls with `err` (e.g. BrokerDisconnectedError), then closes. */
  fail(err: Error): void {
    this.#end(err);
  }

  #end(failure: Error | undefined): void {
    if (this.#closed) return;
    this.#failure = failure;
    this.#closed = true;
    this.#buffer = [];
    this.#inFlight.clear();
    this.#wakeAll();
    const s = this.#subscriber;
    this.#subscriber = undefined;
    if (failure) s?.error(failure);
    else s?.complete();
  }

  #wakeAll(): void {
    const ws = this.#waiters;
    this.#waiters = [];
    for (const w of ws) w();
  }
}
