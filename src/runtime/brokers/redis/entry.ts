import { producerId, sequence, type ProducerId } from '../../ids.js';
import type { Topic } from '../../topics.js';
import type { BrokerMessage, DeadLetter } from '../broker.js';
import { entryProblem, parseSequence, type RawFields } from '../internal/malformed.js';

/**
 * Stream entry fields (binary-safe): `payload` (bytes), `producer` (utf-8), `sequence`
 * (decimal), optional `key`; dead-letter entries add `reason`, `origin` (the entry id in the
 * topic stream), `redeliveryCount`, and `malformed` = `1` for an entry that was not a message.
 * The publish time is the entry id's millisecond part (Redis server clock).
 */
export const Fields = Object.freeze({
  payload: 'payload',
  producer: 'producer',
  sequence: 'sequence',
  key: 'key',
  reason: 'reason',
  origin: 'origin',
  redeliveryCount: 'redeliveryCount',
  malformed: 'malformed',
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

/** Our three fields of an entry, as found (undefined = absent). */
function rawFields(f: Map<string, Buffer>): RawFields {
  const payload = f.get(Fields.payload);
  return {
    ...(payload ? { payload: new Uint8Array(payload.buffer, payload.byteOffset, payload.byteLength) } : {}),
    ...(f.has(Fields.producer) ? { producer: f.get(Fields.producer)!.toString() } : {}),
    ...(f.has(Fields.sequence) ? { sequence: f.get(Fields.sequence)!.toString() } : {}),
  };
}

/**
 * A delivered entry: the message, or, when it is not one, the dead letter it makes (reason
 * from `internal/malformed.ts`, placeholders as in `DeadLetter.message`).
 */
export type Decoded = { readonly message: BrokerMessage } | { readonly malformed: DeadLetter };

/**
 * A delivered entry as a `BrokerMessage`, or the reason it is none (missing fields, a bad
 * sequence, a payload over `maxPayloadBytes`). Never throws: one bad entry must not take its
 * batch down with it.
 * @param deliveryCount Redis' delivery counter (1 on first delivery).
 */
export function decodeEntry(topic: Topic, id: string, flat: Buffer[], deliveryCount: number, maxPayloadBytes: number): Decoded {
  const problem = entryProblem(rawFields(fieldMap(flat)), maxPayloadBytes, Fields);
  if (problem !== undefined) return { malformed: { message: lenientMessage(topic, id, flat, deliveryCount), reason: problem, malformed: true } };
  return { message: lenientMessage(topic, id, flat, deliveryCount) };
}

/**
 * The message an entry makes, with placeholders where it is malformed (payload empty,
 * producer `?`, sequence 0; see `DeadLetter.message`).
 */
function lenientMessage(topic: Topic, id: string, flat: Buffer[], deliveryCount: number): BrokerMessage {
  const f = fieldMap(flat);
  const raw = rawFields(f);
  const key = f.get(Fields.key)?.toString();
  return {
    id,
    topic,
    payload: raw.payload ?? new Uint8Array(0),
    producer: raw.producer ? producerId(raw.producer) : ('?' as ProducerId),
    sequence: (raw.sequence !== undefined ? parseSequence(raw.sequence) : undefined) ?? sequence(0),
    ...(key !== undefined ? { key } : {}),
    redeliveryCount: Math.max(0, deliveryCount - 1),
    publishTime: idTime(id),
  };
}

/**
 * A dead-letter stream entry as a `DeadLetter` (message id = origin id in the topic stream).
 * Malformed originals come back with placeholders and `malformed: true`.
 */
export function toDeadLetter(topic: Topic, flat: Buffer[]): DeadLetter {
  const f = fieldMap(flat);
  const origin = f.get(Fields.origin)?.toString() ?? '0-0';
  const count = Number(f.get(Fields.redeliveryCount)?.toString() ?? '0');
  const message = lenientMessage(topic, origin, flat, count + 1);
  return {
    message: { ...message, publishTime: idTime(origin) },
    reason: f.get(Fields.reason)?.toString() ?? '',
    ...(f.get(Fields.malformed)?.toString() === '1' ? { malformed: true } : {}),
  };
}
