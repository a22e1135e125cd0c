import { compressSync, uncompressSync } from 'lz4-napi';
import { InvalidArgumentError, UndecodableMessageError } from '../../../errors.js';
import type { Producer } from '../broker.js';
import { mapPayloads, type Interceptor } from './compose.js';

/** Compression codecs. `none` still frames the payload, so consumers read mixed producers. */
export type CompressionCodec = 'lz4' | 'none';

/** Options of `compression`. */
export interface CompressionOptions {
  readonly codec: CompressionCodec;
  /** Payloads shorter than this many bytes are sent uncompressed. Default 64. */
  readonly minBytes?: number;
}

/** First byte of a framed payload. */
const Tag = Object.freeze({ none: 0x00, lz4: 0x01 } as const);

/**
 * Payload compression as an interceptor pair (see `compose.ts`).
 *
 * Wire format: one tag byte, then the body. `0x00`: body is the payload as is; `0x01`: body
 * is an LZ4 block with its uncompressed size prepended (lz4-napi's `compressSync`, lz4_flex
 * underneath; prebuilt N-API binaries, no build step). A payload that LZ4 does not make
 * smaller is sent with tag `0x00`.
 * @throws InvalidArgumentError for an unknown codec or a negative `minBytes`.
 */
export function compression(options: CompressionOptions): Interceptor {
  const minBytes = options.minBytes ?? 64;
  if (options.codec !== 'lz4' && options.codec !== 'none') throw new InvalidArgumentError(`unknown compression codec ${String(options.codec)}`);
  if (!Number.isInteger(minBytes) || minBytes < 0) throw new InvalidArgumentError(`minBytes must be an integer >= 0, got ${minBytes}`);
  const encode = (payload: Uint8Array): Uint8Array => {
    if (options.codec === 'lz4' && payload.byteLength >= minBytes) {
      const body = compressSync(Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength));
      if (body.byteLength < payload.byteLength) return frame(Tag.lz4, body);
    }
    return frame(Tag.none, payload);
  };
  return {
    producer: (next: Producer): Producer => ({
      topic: next.topic,
      producer: next.producer,
      send: (payload, o) => next.send(encode(payload), o),
      flush: () => next.flush(),
      close: () => next.close(),
    }),
    consumer: (next) => mapPayloads(next, decompress, 'undecodable compression frame'),
  };
}

/**
 * The payload inside a compression frame.
 * @throws UndecodableMessageError on an empty payload, an unknown tag or a corrupt LZ4 body
 *   (consumers dead-letter such messages).
 */
export function decompress(framed: Uint8Array): Uint8Array {
  if (framed.byteLength === 0) throw new UndecodableMessageError('empty payload: no compression tag');
  const body = framed.subarray(1);
  switch (framed[0]) {
    case Tag.none:
      return body;
    case Tag.lz4:
      try {
        const out = uncompressSync(body);
        return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
      } catch (err) {
        throw new UndecodableMessageError(`corrupt lz4 payload: ${(err as Error).message}`, { cause: err });
      }
    default:
      throw new UndecodableMessageError(`unknown compression tag 0x${framed[0]!.toString(16)}`);
  }
}

function frame(tag: number, body: Uint8Array): Uint8Array {
  const out = new Uint8Array(body.byteLength + 1);
  out[0] = tag;
  out.set(body, 1);
  return out;
}
