import { producerId, sequence } from '../../ids.js';
import type { Topic } from '../../topics.js';
import type { BrokerMessage, DeadLetter } from '../broker.js';

/**
 * Stream entry fields (binary-safe): `payload` (bytes), `producer` (utf-8), `sequence`
 * (decimal), optional `key`; dead-letter entries add `reason`, `origin` (the entry id in the
 * topic stream) and `redeliveryCount`. The publish time is the entry id's millisecond part
 * (Redis server clock).
 */
export const Fields = Object.freeze({
  payload: 'payload',
  producer: 'producer',
  sequence: 'sequence',
  key: 'key',
  reason: 'reason',
  origin: 'origin',
  redeliveryCount: 'redeliveryCount',
} as const);

/** Field/value list for XADD. */
export function entryFields(payload: Uint8Array, producer: string, seq: number, key?: string): Array<string | Buffer> {
  const out: Array<string | Buffer> = [
    Fields.payload, Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength),
    Fields.producer, producer,
    Fields.sequence, String(seq),
  ];
  if (key !== undefined) out.push(Fields.key, key);
  return out;
}

/** `[f1, v1, f2, v2, ...]` as returned by XRANGE / XREADGROUP in buffer mode. */
function fieldMap(flat: Buffer[]): Map<string, Buffer> {
  const m = new Map<string, Buffer>();
  for (let i = 0; i + 1 < flat.length; i += 2) m.set(flat[i]!.toString(), flat[i + 1]!);
  return m;
}

/** Millisecond part of a stream id `ms-seq`. */
export function idTime(id: string): number {
  return Number(id.slice(0, id.indexOf('-')));
}

/** Numeric order of stream ids (`ms-seq`); lexicographic order is wrong across lengths. */
export function compareIds(a: string, b: string): number {
  const [am, as] = a.split('-');
  const [bm, bs] = b.split('-');
  return Number(am) - Number(bm) || Number(as) - Number(bs);
}

/**
 * A delivered entry as a `BrokerMessage`.
 * @param deliveryCount Redis' delivery counter (1 on first delivery).
 * @throws RangeError when a field is missing or malformed (not a shardflow entry).
 */
export function toMessage(topic: Topic, id: string, flat: Buffer[], deliveryCount: number): BrokerMessage {
  const f = fieldMap(flat);
  const payload = f.get(Fields.payload);
  const producer = f.get(Fields.producer);
  const seq = f.get(Fields.sequence);
  if (!payload || !producer || !seq) throw new RangeError(`stream entry ${id} lacks payload/producer/sequence`);
  const key = f.get(Fields.key)?.toString();
  return {
    id,
    topic,
    payload: new Uint8Array(payload.buffer, payload.byteOffset, payload.byteLength),
    producer: producerId(producer.toString()),
    sequence: sequence(Number(seq.toString())),
    ...(key !== undefined ? { key } : {}),
    redeliveryCount: Math.max(0, deliveryCount - 1),
    publishTime: idTime(id),
  };
}

/** A dead-letter stream entry as a `DeadLetter` (message id = origin id in the topic stream). */
export function toDeadLetter(topic: Topic, flat: Buffer[]): DeadLetter {
  const f = fieldMap(flat);
  const origin = f.get(Fields.origin)?.toString() ?? '0-0';
  const count = Number(f.get(Fields.redeliveryCount)?.toString() ?? '0');
  return {
    message: toMessage(topic, origin, flat, count + 1),
    reason: f.get(Fields.reason)?.toString() ?? '',
  };
}
