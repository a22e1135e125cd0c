import type { Reply } from './reply.js';
import type { OverflowPolicy } from './spawnOptions.js';

/** A sender blocked on a full `'backpressure'` mailbox. */
interface Waiter<M, R> {
  readonly message: M;
  readonly reply: Reply<R> | undefined;
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

/**
 * FIFO message queue of one actor: a growable ring buffer of messages with a parallel ring of
 * optional `ask` replies, so a `tell` allocates nothing here.
 *
 * The subtle case is backpressure: when the queue is full, senders park in `#waiters` (FIFO). Each
 * `shift()` that frees a slot moves the first waiter's message into the queue *before* resolving
 * its promise, so a parked sender can never be overtaken by a later `tell` (which sees
 * `waiting > 0` and parks too, see `ActorCell.tell`), and ordering per sender is kept.
 */
export class Mailbox<M, R> {
  /** Maximum queued messages (`Infinity` = unbounded). */
  readonly capacity: number;
  /** What to do when full; see {@link OverflowPolicy}. */
  readonly overflow: OverflowPolicy;
  #messages: (M | undefined)[] = new Array(16);
  #replies: (Reply<R> | undefined)[] = new Array(16);
  #mask = 15;
  #head = 0;
  #size = 0;
  #waiters: Waiter<M, R>[] = [];

  constructor(capacity: number, overflow: OverflowPolicy) {
    this.capacity = capacity;
    this.overflow = overflow;
  }

  /** Queued messages. */
  get size(): number {
    return this.#size;
  }

  /** Senders parked by backpressure. */
  get waiting(): number {
    return this.#waiters.length;
  }

  /** True when a new message can go straight in: below capacity and nobody parked ahead of it. */
  get hasRoom(): boolean {
    return this.#size < this.capacity && this.#waiters.length === 0;
  }

  /** Appends a message (the caller checked {@link hasRoom}). */
  push(message: M, reply: Reply<R> | undefined): void {
    if (this.#size > this.#mask) this.#grow();
    const index = (this.#head + this.#size) & this.#mask;
    this.#messages[index] = message;
    this.#replies[index] = reply;
    this.#size++;
  }

  /** The oldest message; only valid when `size > 0`. */
  peekMessage(): M {
    return this.#messages[this.#head] as M;
  }

  /** The oldest message's reply (undefined for a `tell`); only valid when `size > 0`. */
  peekReply(): Reply<R> | undefined {
    return this.#replies[this.#head];
  }

  /** Removes the oldest message and admits the first parked sender if there is now room. */
  shift(): void {
    const head = this.#head;
    this.#messages[head] = undefined;
    this.#replies[head] = undefined;
    this.#head = (head + 1) & this.#mask;
    this.#size--;
    if (this.#waiters.length > 0 && this.#size < this.capacity) {
      const waiter = this.#waiters.shift() as Waiter<M, R>;
      this.push(waiter.message, waiter.reply);
      waiter.resolve();
    }
  }

  /** Parks a sender until {@link shift} makes room; the promise rejects if the mailbox is closed first. */
  park(message: M, reply: Reply<R> | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#waiters.push({ message, reply, resolve, reject });
    });
  }

  /**
   * Empties the mailbox for good: parked senders and queued asks reject with `error`, queued tells
   * are dropped. @returns the number of messages dropped (queued plus parked).
   */
  close(error: unknown): number {
    const dropped = this.#size + this.#waiters.length;
    while (this.#size > 0) {
      this.peekReply()?.reject(error);
      const head = this.#head;
      this.#messages[head] = undefined;
      this.#replies[head] = undefined;
      this.#head = (head + 1) & this.#mask;
      this.#size--;
    }
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const waiter of waiters) {
      waiter.reply?.reject(error);
      waiter.reject(error);
    }
    return dropped;
  }

  #grow(): void {
    const length = this.#mask + 1;
    const messages: (M | undefined)[] = new Array(length * 2);
    const replies: (Reply<R> | undefined)[] = new Array(length * 2);
    for (let i = 0; i < this.#size; i++) {
      const from = (this.#head + i) & this.#mask;
      messages[i] = this.#messages[from];
      replies[i] = this.#replies[from];
    }
    this.#messages = messages;
    this.#replies = replies;
    this.#head = 0;
    this.#mask = length * 2 - 1;
  }
}
