import type WebSocket from 'ws';
import { BrokerClosedError, BrokerDisconnectedError, InvalidArgumentError, PayloadTooLargeError } from '../../../errors.js';
import { checkSendSize } from '../internal/malformed.js';
import { sequence as toSequence, type ProducerId } from '../../ids.js';
import { topicName, type Topic } from '../../topics.js';
import type { Producer, SendOptions } from '../broker.js';
import { Props, topicPath, type PulsarTopicName } from './names.js';
import { openSocket } from './socket.js';

/** Options of a Pulsar WebSocket producer. Times in ms. */
export interface PulsarProducerConfig {
  /** `ws://127.0.0.1:8080`. */
  readonly wsUrl: string;
  readonly target: PulsarTopicName;
  /** Our topic (what `Producer.topic` reports). */
  readonly topic: Topic;
  readonly producer: ProducerId;
  readonly connectTimeoutMs: number;
  /** Pulsar's `sendTimeoutMillis`: a send not persisted by then fails. */
  readonly sendTimeoutMs: number;
  /** Most sends awaiting Pulsar's receipt; further sends wait (backpressure). */
  readonly maxPending: number;
  /** Longest payload `send` takes, bytes. */
  readonly maxPayloadBytes: number;
  /** Largest WebSocket frame the proxy takes, bytes (`PulsarBrokerOptions.maxFrameBytes`). */
  readonly maxFrameBytes: number;
}

/**
 * Pulsar's default `webSocketMaxTextFrameSize`, in bytes (broker.conf, 1 MiB): the WebSocket
 * proxy closes a connection that sends a larger frame.
 */
export const PULSAR_WS_MAX_FRAME_BYTES = 1024 * 1024;

/** Bytes of a send's frame kept for its JSON and properties (producer, sequence, key, context). */
const FRAME_RESERVE_BYTES = 2048;

/**
 * The longest payload whose send fits a WebSocket frame of `frameBytes`: base64 takes 4 bytes
 * per 3, and `FRAME_RESERVE_BYTES` go to the JSON around it (784,896 for 1 MiB frames).
 */
export function pulsarPayloadLimit(frameBytes: number): number {
  return Math.max(0, Math.floor((frameBytes - FRAME_RESERVE_BYTES) / 4) * 3);
}

interface Pending {
  readonly resolve: (messageId: string) => void;
  readonly reject: (err: Error) => void;
}

/** The JSON answer of Pulsar to one WebSocket send. */
interface ProducerAck {
  readonly result: string;
  readonly messageId?: string;
  readonly context?: string;
  readonly errorMsg?: string;
}

/**
 * A producer over `/ws/v2/producer/persistent/<tenant>/<ns>/<topic>`: one JSON frame per
 * message (`payload` base64, `properties` with producer and sequence, `key`, `context`), one
 * receipt per message once Pulsar persisted it. Pulsar-side batching is off: batching is an
 * interceptor of ours (`interceptors/batching.ts`), the same for every broker.
 *
 * Disconnects: sends waiting for a receipt reject with BrokerDisconnectedError (they may or
 * may not have been persisted: at-least-once callers resend, consumers skip by sequence);
 * the next send reconnects.
 */
export class PulsarProducer implements Producer {
  readonly topic: Topic;
  readonly producer: ProducerId;
  readonly #c: PulsarProducerConfig;
  #ws: WebSocket | undefined;
  #connecting: Promise<WebSocket> | undefined;
  readonly #pending = new Map<string, Pending>();
  readonly #inFlight = new Set<Promise<unknown>>();
  #drained: Array<() => void> = [];
  #context = 0;
  #next = 0;
  #closed = false;

  private constructor(config: PulsarProducerConfig) {
    this.#c = config;
    this.topic = config.topic;
    this.producer = config.producer;
  }

  /** Connects. @throws BrokerDisconnectedError, InvalidArgumentError (see `openSocket`). */
  static async open(config: PulsarProducerConfig): Promise<PulsarProducer> {
    const p = new PulsarProducer(config);
    await p.#socket();
    return p;
  }

  /** @throws BrokerClosedError, BrokerDisconnectedError; PayloadTooLargeError over `maxPayloadBytes` or the frame limit (nothing sent). */
  async send(payload: Uint8Array, options?: SendOptions): Promise<void> {
    if (this.#closed) throw new BrokerClosedError(`producer ${this.producer} on ${topicName(this.topic)} is closed`);
    checkSendSize(this.topic, payload.byteLength, this.#c.maxPayloadBytes);
    const seq = options?.sequence ?? toSequence(this.#next);
    this.#next = Math.max(this.#next, seq + 1);
    await this.sendRaw(payload, { [Props.producer]: this.producer, [Props.sequence]: String(seq) }, options?.key);
  }

  /**
   * Sends one message with the given properties (also used for dead letters).
   * @returns Pulsar's message id (base64).
   * @throws BrokerClosedError, BrokerDisconnectedError; PayloadTooLargeError when its frame is
   *   over `maxFrameBytes` (the proxy would close the connection on it; nothing sent)
   */
  async sendRaw(payload: Uint8Array, properties: Record<string, string>, key?: string): Promise<string> {
    const context = String(this.#context++);
    const frame = JSON.stringify({
      payload: Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength).toString('base64'),
      properties,
      context,
      ...(key !== undefined ? { key } : {}),
    });
    const frameBytes = Buffer.byteLength(frame);
    if (frameBytes > this.#c.maxFrameBytes) {
      throw new PayloadTooLargeError(
        `pulsar send on ${topicName(this.topic)}: its WebSocket frame of ${frameBytes} bytes (a payload of ${payload.byteLength} bytes in base64, and its properties) exceeds maxFrameBytes ${this.#c.maxFrameBytes} (the proxy's webSocketMaxTextFrameSize); nothing was sent`,
        payload.byteLength,
        this.#c.maxPayloadBytes, // within what a frame takes (PulsarBroker.connect refuses more)
      );
    }
    while (this.#pending.size >= this.#c.maxPending) await new Promise<void>((r) => this.#drained.push(r));
    const ws = await this.#socket();
    const receipt = new Promise<string>((resolve, reject) => this.#pending.set(context, { resolve, reject }));
    this.#inFlight.add(receipt);
    ws.send(frame, (err) => {
      if (err) this.#settle(context, new BrokerDisconnectedError(`pulsar send on ${topicName(this.topic)}: ${err.message}`, { cause: err }));
    });
    try {
      return await receipt;
    } finally {
      this.#inFlight.delete(receipt);
    }
  }

  /** Resolves when every send so far got its receipt (failed ones rejected their own `send`). */
  async flush(): Promise<void> {
    await Promise.allSettled([...this.#inFlight]);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.flush();
    const ws = this.#ws;
    this.#ws = undefined;
    if (ws) await closeSocket(ws);
  }

  async #socket(): Promise<WebSocket> {
    if (this.#ws) return this.#ws;
    if (this.#closed) throw new BrokerClosedError(`producer ${this.producer} on ${topicName(this.topic)} is closed`);
    this.#connecting ??= (async () => {
      const q = new URLSearchParams({ batchingEnabled: 'false', sendTimeoutMillis: String(this.#c.sendTimeoutMs), maxPendingMessages: String(this.#c.maxPending) });
      const ws = await openSocket(`${this.#c.wsUrl}/ws/v2/producer/${topicPath(this.#c.target)}?${q}`, this.#c.connectTimeoutMs, (data) =>
        this.#onReceipt(String(data)),
      );
      ws.on('error', () => {}); // 'close' follows and carries the consequence
      ws.on('close', () => {
        if (this.#ws === ws) this.#ws = undefined;
        const lost = new BrokerDisconnectedError(`pulsar producer connection on ${topicName(this.topic)} closed`);
        for (const ctx of [...this.#pending.keys()]) this.#settle(ctx, lost);
      });
      this.#ws = ws;
      return ws;
    })().finally(() => {
      this.#connecting = undefined;
    });
    return this.#connecting;
  }

  #onReceipt(text: string): void {
    let ack: ProducerAck;
    try {
      ack = JSON.parse(text) as ProducerAck;
    } catch (err) {
      // Not a receipt: nothing to settle; the pending send times out through Pulsar's sendTimeout.
      process.emitWarning(`pulsar producer on ${topicName(this.topic)}: unparsable frame ${text.slice(0, 100)}: ${(err as Error).message}`);
      return;
    }
    if (ack.context === undefined) return;
    if (ack.result === 'ok') this.#settle(ack.context, undefined, ack.messageId ?? '');
    else this.#settle(ack.context, new BrokerDisconnectedError(`pulsar send on ${topicName(this.topic)} failed: ${ack.result} ${ack.errorMsg ?? ''}`));
  }

  #settle(context: string, err: Error | undefined, messageId = ''): void {
    const p = this.#pending.get(context);
    if (!p) return;
    this.#pending.delete(context);
    if (err) p.reject(err);
    else p.resolve(messageId);
    const waiting = this.#drained.shift();
    waiting?.();
  }
}

/** Closes `ws` and waits for the close handshake (at most 2 s, then terminates). */
export function closeSocket(ws: WebSocket): Promise<void> {
  return new Promise((resolve) => {
    if (ws.readyState === ws.CLOSED) return resolve();
    const timer = setTimeout(() => {
      ws.terminate();
      resolve();
    }, 2000);
    ws.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
    ws.close();
  });
}
