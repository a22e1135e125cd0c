import { InvalidArgumentError } from '../../errors.js';
import type { Chunk, IterateOptions, RawChunk } from '../iteration.js';
import { nativeSnapshotOf } from '../snapshot.js';
import type { NativeIterator, NativeIteratorOptions } from '../native.js';
import { iterationBounds } from './iterationBounds.js';

const DEFAULT_CHUNK_SIZE = 1024;
const DEFAULT_CHUNK_BYTES = 8 * 2 ** 20;

/** One native chunk: key buffer and offsets, value buffer and offsets (absent when keys only). */
export type NativeChunkParts = readonly [Buffer, Uint32Array, Buffer | undefined, Uint32Array | undefined];

/**
 * The non-empty chunks of a native iterator over column family `cf` (its index, or the error
 * to throw for an unknown or closed one), made by `open` with the bounds, direction and
 * snapshot of `opts`: what `Store` and `IndexedWriteBatch` iterate alike. The iterator is
 * opened at the first step and closed when the loop ends, breaks or throws.
 * @throws InvalidArgumentError for a bad `chunkSize` (integer >= 1) or `chunkBytes` (>= 1);
 *   `cf` when it is an error; StoreClosedError from a released snapshot
 */
export async function* nativeChunks(
  cf: number | Error,
  open: (cf: number, options: NativeIteratorOptions) => NativeIterator,
  opts: IterateOptions,
  keysOnly: boolean,
): AsyncGenerator<NativeChunkParts> {
  if (cf instanceof Error) throw cf;
  const chunkSize = opts.chunkSize ?? DEFAULT_CHUNK_SIZE;
  const chunkBytes = opts.chunkBytes ?? DEFAULT_CHUNK_BYTES;
  if (!Number.isInteger(chunkSize) || chunkSize < 1) throw new InvalidArgumentError('chunkSize must be an integer >= 1');
  if (!(chunkBytes >= 1)) throw new InvalidArgumentError('chunkBytes must be >= 1');
  const { lower, upper, empty } = iterationBounds(opts);
  if (empty) return;
  const snapshot = nativeSnapshotOf(opts);
  const it = open(cf, {
    ...(lower ? { lower } : {}),
    ...(upper ? { upper } : {}),
    reverse: opts.reverse === true,
    keysOnly,
    ...(snapshot ? { snapshot } : {}),
  });
  try {
    for (;;) {
      const [kb, ko, vb, vo, done] = await it.next(chunkSize, chunkBytes);
      if (ko.length > 1) yield [kb, ko, vb, vo] as const;
      if (done) return;
    }
  } finally {
    it.close();
  }
}

/** Each native chunk as a `Chunk`: a Buffer per key and value, viewing the chunk's buffers. */
export async function* chunksOf(parts: AsyncIterable<NativeChunkParts>): AsyncGenerator<Chunk> {
  for await (const [kb, ko, vb, vo] of parts) {
    const n = ko.length - 1;
    const keys = new Array<Buffer>(n);
    for (let k = 0; k < n; k++) keys[k] = kb.subarray(ko[k]!, ko[k + 1]!);
    let values: Buffer[] = [];
    if (vb !== undefined && vo !== undefined) {
      values = new Array<Buffer>(n);
      for (let k = 0; k < n; k++) values[k] = vb.subarray(vo[k]!, vo[k + 1]!);
    }
    yield { keys, values };
  }
}

/** Each native chunk as a `RawChunk` (no object per entry). */
export async function* rawChunksOf(parts: AsyncIterable<NativeChunkParts>): AsyncGenerator<RawChunk> {
  for await (const [kb, ko, vb, vo] of parts) {
    if (vb !== undefined && vo !== undefined) yield { count: ko.length - 1, keys: kb, keyOffsets: ko, values: vb, valueOffsets: vo };
  }
}

/** The entries of `chunks` one by one, `[key, value]` (an empty value when keys only). */
export async function* entriesOf(chunks: AsyncIterable<Chunk>): AsyncGenerator<[Buffer, Buffer]> {
  const empty = Buffer.alloc(0);
  for await (const { keys, values } of chunks) {
    for (let k = 0; k < keys.length; k++) yield [keys[k]!, values[k] ?? empty];
  }
}
