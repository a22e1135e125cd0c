import type { Subscription } from 'rxjs';
import { isShardflowError } from '../errors.js';
import type { Logger } from '../runtime/actor/logger.js';
import type { Broker, BrokerMessage, Consumer } from '../runtime/brokers/broker.js';
import type { ApplicationHost } from './application.js';
import { ASK_SUBSCRIPTION, askErrorInfo, askReplyCodec, askRequestCodec, askTopic, type AskReply, type AskRequest } from './askWire.js';
import { ReplyProducers } from './replyProducers.js';

/** Most requests of one unit running at once on its owner (the request consumer's receiver queue). */
export const ASK_CONCURRENCY = 64;
/** Delay before a request nacked because the partition does not run here (yet, or any more) comes back, in ms. */
const NOT_RUNNING_NACK_MS = 500;

/**
 * The worker side of remote asks (docs/cluster.md, "Asking partitions across the cluster"):
 * for each unit the worker runs, a consumer of the unit's request topic (`askTopic`, failover
 * subscription `sf-ask`) that calls `host.ask(stage, partition, request)` and publishes the
 * answer or the error on the asking client's reply topic, then acks the request.
 *
 * - `close(unit)` (before the partition stops: a hand-back, a fence) closes the consumer
 *   first; requests still running are then neither answered nor acked, so the broker hands
 *   them to the next owner's consumer (a request may run twice: `ask` must be idempotent).
 * - A request the host answers with ActorStoppedError (the partition does not run here) is
 *   nacked for redelivery, never answered with that error.
 * - A request past its `expiresAt` (its client stopped waiting) is acked without running.
 * - A request that does not decode, or names another unit than its topic's, is dead-lettered
 *   with the reason.
 * - A reply that cannot be sent (the broker failed) nacks the request, which runs again.
 */
export class AskResponders {
  readonly #units = new Map<string, UnitResponder>();
  readonly #replies: ReplyProducers;

  constructor(
    readonly broker: Broker,
    readonly host: ApplicationHost,
    /** The worker's member id: replies name it, and it names the reply producers. */
    readonly worker: string,
    readonly logger: Logger,
  ) {
    this.#replies = new ReplyProducers(broker, `sf-ask@${worker}`);
  }

  /** True while the unit's request consumer is open. */
  has(unit: string): boolean {
    return this.#units.has(unit);
  }

  /**
   * Opens the request consumer of partition `partition` of `stage` (unit `<stage>/<partition>`).
   * No-op when open already.
   * @throws the broker's subscribe errors (BrokerDisconnectedError, ...): the caller tries again later
   */
  async open(stage: string, partition: number): Promise<void> {
    const unit = `${stage}/${partition}`;
    if (this.#units.has(unit)) return;
    const consumer = await this.broker.subscribe(askTopic(stage, partition), {
      subscription: ASK_SUBSCRIPTION,
      type: 'failover',
      receiverQueueSize: ASK_CONCURRENCY,
      nackRedeliveryDelayMs: NOT_RUNNING_NACK_MS,
    });
    const responder = new UnitResponder(this, stage, partition, consumer, this.#replies);
    this.#units.set(unit, responder);
    responder.start();
  }

  /** Closes the unit's request consumer (its unacked requests go back to the broker). Resolves at once when none is open. */
  async close(unit: string): Promise<void> {
    const r = this.#units.get(unit);
    if (!r) return;
    this.#units.delete(unit);
    await r.close();
  }

  /** A unit's consumer failed (its subscription's data lost, ...): forget it, so that the worker's next heartbeat opens it again. */
  failed(unit: string, responder: UnitResponder): void {
    if (this.#units.get(unit) !== responder) return;
    this.#units.delete(unit);
    void responder.close().catch(() => {});
  }

  /** Closes every request consumer, then the reply producers. */
  async closeAll(): Promise<void> {
    await Promise.all([...this.#units.keys()].map((u) => this.close(u)));
    await this.#replies.closeAll();
  }
}

/** One unit's request consumer. */
class UnitResponder {
  #closed = false;
  #feed: Subscription | undefined;

  constructor(
    readonly owner: AskResponders,
    readonly stage: string,
    readonly partition: number,
    readonly consumer: Consumer,
    readonly replies: ReplyProducers,
  ) {}

  start(): void {
    this.#feed = this.consumer.messages$.subscribe({
      next: (m) => void this.#handle(m),
      error: (err: unknown) => {
        const unit = `${this.stage}/${this.partition}`;
        this.owner.logger.warn({ worker: this.owner.worker, unit, err }, 'ask request consumer failed; it is opened again at the next heartbeat');
        this.owner.failed(unit, this);
      },
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#feed?.unsubscribe();
    await this.consumer.close();
  }

  /** Runs one request; never rejects (a failure is logged, the request nacked or left unacked). */
  async #handle(m: BrokerMessage): Promise<void> {
    const { logger, worker } = this.owner;
    const unit = `${this.stage}/${this.partition}`;
    try {
      let request: AskRequest;
      try {
        request = askRequestCodec.decode(m.payload);
      } catch (err) {
        await this.consumer.deadLetter(m, (err as Error).message);
        return;
      }
      if (request.stage !== this.stage || request.partition !== this.partition) {
        await this.consumer.deadLetter(m, `AskRequest for ${request.stage}/${request.partition} on the request topic of ${unit}`);
        return;
      }
      if (Date.now() > request.expiresAt) {
        logger.debug({ worker, unit, id: request.id }, 'ask request expired before it ran (its client stopped waiting): acked without running');
        await this.consumer.ack(m);
        return;
      }
      let reply: AskReply;
      try {
        reply = { id: request.id, worker, ok: true, answer: await this.owner.host.ask(this.stage, this.partition, request.request) };
      } catch (err) {
        if (this.#closed) return;
        if (isShardflowError(err) && err.code === 'SF_ERR_ACTOR_STOPPED') {
          await this.consumer.nack(m, `partition ${unit} does not run on ${worker}: ${err.message}`);
          return;
        }
        reply = { id: request.id, worker, ok: false, error: askErrorInfo(err) };
      }
      if (this.#closed) return; // the next owner runs it again
      await this.#reply(request.replyTo, reply);
      if (this.#closed) return; // answered; the client drops the next owner's answer
      await this.consumer.ack(m);
    } catch (err) {
      if (this.#closed) return;
      logger.warn({ worker, unit, err }, 'ask request failed (reply or ack); nacked for redelivery');
      await this.consumer.nack(m, `reply failed: ${(err as Error).message}`).catch(() => {});
    }
  }

  /**
   * Sends `reply`; an answer that msgpack cannot encode or the broker refuses as too large
   * (InvalidArgumentError, PayloadTooLargeError) is replaced by that error, so the client
   * hears of it instead of the request running again and again.
   * @throws the broker's send errors (the caller nacks the request)
   */
  async #reply(slot: number, reply: AskReply): Promise<void> {
    let bytes: Uint8Array | undefined;
    try {
      bytes = askReplyCodec.encode(reply);
      await this.replies.send(slot, bytes);
      return;
    } catch (err) {
      const refused = bytes === undefined || (isShardflowError(err) && (err.code === 'SF_ERR_PAYLOAD_TOO_LARGE' || err.code === 'SF_ERR_INVALID_ARGUMENT'));
      if (!reply.ok || !refused) throw err;
      const info = askErrorInfo(err);
      await this.replies.send(slot, askReplyCodec.encode({ id: reply.id, worker: reply.worker, ok: false, error: { ...info, message: `the answer cannot be sent: ${info.message}` } }));
    }
  }
}
