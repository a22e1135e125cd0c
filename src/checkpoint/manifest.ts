/**
 * A checkpoint's manifest: what makes a checkpoint visible (it is written last) and what a
 * restore checks the files against. Stored as JSON at `<key>/manifests/<sequence>.json`
 * (the sequence zero-padded to 16 digits, so names sort as numbers):
 *
 * ```json
 * {"format": "shardflow-checkpoint/1", "key": "p3", "sequence": 12,
 *  "createdAt": "2026-12-01T16:00:00.000Z",
 *  "files": [{"name": "000013.sst", "bytes": 115562, "sha256": "9f86d0..."}],
 *  "metadata": "<base64>"}
 * ```
 *
 * Each file is stored once per key at `<key>/files/<sha256>` (content-addressed: a file
 * with the same bytes in two checkpoints is one object). A file may instead be stored as
 * `chunks`, objects `<key>/files/<sha256 of the chunk>` whose concatenation is the file (its
 * `sha256` then the hash of the chunks' digests, `chunkListSha256`): the live write-ahead log of a put that stored only what
 * the log gained since the previous put ("WAL tail puts", docs/checkpoints.md). A manifest
 * with chunks has format `shardflow-checkpoint/2`, so that a reader of format 1 refuses it
 * instead of looking for an object the whole file was never stored as.
 *
 * A file in chunks may instead name a `link`: one object `<key>/files/log-<id>-<log name>`
 * whose first `bytes` bytes are the chunks, in order (each still checked against its
 * digest). A directory store on the store's own filesystem hard-links the live log there
 * instead of copying each new range of it ("Linked logs", docs/checkpoints.md): RocksDB only
 * appends to a log, so the object grows past what a manifest records and a restore reads its
 * prefix. A manifest with a link has format `shardflow-checkpoint/3`.
 *
 * A chunk may instead be **packed**: bytes `at` to `at + bytes` of the payload of the key's
 * manifest of sequence `in`. A WAL tail put to a store of remote objects (S3) stores its new log
 * bytes in its manifest object, after the JSON and one newline (0x0A, which JSON text never holds
 * unescaped), so that the put is one request instead of a chunk and then a manifest ("Packed
 * chunks", docs/checkpoints.md); the next puts of the chain name those bytes in that manifest.
 * Such a manifest records its payload's size as `packedBytes`; a payload stored compressed
 * (`packedEncoding: "deflate-raw"`, RFC 1951) also records its size once inflated as
 * `packedRawBytes`, the bytes its chunks' offsets count. A manifest with a packed chunk or
 * a payload has format `shardflow-checkpoint/4`. A manifest that holds a packed chunk of a kept
 * one is kept with it (`collect`), but is no longer a checkpoint to restore (its other files may
 * be gone).
 */
import { createHash } from 'node:crypto';
import { CheckpointDamagedError, InvalidArgumentError } from '../errors.js';

export const MANIFEST_FORMAT = 'shardflow-checkpoint/1';
/** The format of a manifest with a file stored as chunks (`CheckpointFile.chunks`). */
export const MANIFEST_FORMAT_CHUNKED = 'shardflow-checkpoint/2';
/** The format of a manifest with a file whose chunks are the prefix of a linked log object (`CheckpointFile.link`). */
export const MANIFEST_FORMAT_LINKED = 'shardflow-checkpoint/3';
/** The format of a manifest with a packed chunk (`CheckpointChunk.in`) or a payload of packed chunks. */
export const MANIFEST_FORMAT_PACKED = 'shardflow-checkpoint/4';
const FORMATS = [MANIFEST_FORMAT, MANIFEST_FORMAT_CHUNKED, MANIFEST_FORMAT_LINKED, MANIFEST_FORMAT_PACKED];

/**
 * One part of a file kept as chunks: its size in bytes and SHA-256 (hex). Stored as the object
 * `<key>/files/<sha256>`, or, packed, as bytes `at` to `at + bytes` of the payload of the key's
 * manifest of sequence `in` (both set or neither).
 */
export interface CheckpointChunk {
  readonly bytes: number;
  readonly sha256: string;
  /** The sequence of the manifest whose payload holds the chunk (packed). */
  readonly in?: number;
  /** Its offset in that payload, bytes. */
  readonly at?: number;
}

/**
 * One file of a checkpoint: its name in the store's directory, size in bytes, SHA-256 (hex),
 * and, for a file stored in parts, the `chunks` whose concatenation it is (in order; their
 * sizes sum to `bytes`); without chunks it is stored whole. `sha256` is of the file's content
 * when it is stored whole, and of its chunks' digests (32 bytes each, in order: a hash list,
 * `chunkListSha256`) when it is in chunks, each chunk being checked against its own.
 */
export interface CheckpointFile {
  readonly name: string;
  readonly bytes: number;
  readonly sha256: string;
  readonly chunks?: readonly CheckpointChunk[];
  /**
   * With `chunks`: the object (`logLinkName`) whose first `bytes` bytes are the chunks, in
   * order, instead of one object per chunk. It may be longer: a live log linked into the store.
   */
  readonly link?: string;
}

/** The `sha256` of a file stored as `chunks`: SHA-256 over their digests (raw bytes, in order). */
export function chunkListSha256(chunks: readonly CheckpointChunk[]): string {
  const h = createHash('sha256');
  for (const c of chunks) h.update(Buffer.from(c.sha256, 'hex'));
  return h.digest('hex');
}

/** The names of the stored objects that hold `file` (`fileObjectName` of each chunk, or of the whole file). */
export function objectsOfFile(key: string, file: CheckpointFile): string[] {
  if (file.link) return [file.link];
  return file.chunks ? file.chunks.map((c) => (c.in !== undefined ? manifestName(key, c.in) : fileObjectName(key, c.sha256))) : [fileObjectName(key, file.sha256)];
}

/** A complete checkpoint of one key, as its manifest records it. */
export interface CheckpointManifest {
  /** The checkpoint key (a partition id such as `p3`). */
  readonly key: string;
  /** The caller's sequence number, above every earlier checkpoint's of the key. */
  readonly sequence: number;
  /** When the manifest was written (ISO 8601, UTC). */
  readonly createdAt: string;
  /** Every file of the store's checkpoint directory. */
  readonly files: readonly CheckpointFile[];
  /** Sum of the files' sizes, bytes. */
  readonly bytes: number;
  /** The caller's opaque bytes (broker positions, applied marks), empty when none were given. */
  readonly metadata: Uint8Array;
}

const KEY_SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
/** Segments a nested key may not have after its first: the layout's own folder names (a key `a/files` would mix with key `a`'s files). */
const RESERVED_SEGMENTS = new Set(['files', 'manifests']);
const FILE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$/;
const SHA256 = /^[0-9a-f]{64}$/;
const SEQUENCE_DIGITS = 16;

/**
 * @throws InvalidArgumentError unless `key` is 1 to 4 segments joined by `/` (a cluster's
 *   partition key is `<cluster>/<stage>/p<i>`), 255 characters at most, each segment 1-128
 *   of `A-Z a-z 0-9 . _ -` starting with a letter or digit, and no segment but the first
 *   named `files` or `manifests` (the layout's folders)
 */
export function checkKey(key: string): void {
  const segments = typeof key === 'string' ? key.split('/') : [];
  const ok = segments.length >= 1 && segments.length <= 4 && key.length <= 255
    && segments.every((s, i) => KEY_SEGMENT.test(s) && (i === 0 || !RESERVED_SEGMENTS.has(s)));
  if (!ok) {
    throw new InvalidArgumentError(`a checkpoint key is 1 to 4 segments joined by '/' (255 characters at most), each 1-128 characters of A-Z a-z 0-9 . _ - starting with a letter or digit, none but the first named files or manifests; got ${JSON.stringify(key)}`);
  }
}

/** @throws InvalidArgumentError unless `sequence` is a safe integer >= 0 */
export function checkSequence(sequence: number): void {
  if (!Number.isSafeInteger(sequence) || sequence < 0) {
    throw new InvalidArgumentError(`a checkpoint sequence number is a safe integer >= 0, got ${String(sequence)}`);
  }
}

export const manifestsPrefix = (key: string): string => `${key}/manifests/`;
export const filesPrefix = (key: string): string => `${key}/files/`;
export const manifestName = (key: string, sequence: number): string =>
  `${manifestsPrefix(key)}${String(sequence).padStart(SEQUENCE_DIGITS, '0')}.json`;
export const fileObjectName = (key: string, sha256: string): string => `${filesPrefix(key)}${sha256}`;
/** A linked log's object name, after `filesPrefix(key)`: `log-<id>-<log name>` (`id`: 12 hex digits naming the open store). */
const LINK_NAME = /^log-[0-9a-f]{12}-\d+\.log$/;
/**
 * The object a directory store hard-links log `log` of the open store `id` to (`CheckpointFile.link`).
 * @param id 12 lowercase hex digits, one per open store (a reopened store gets a new one)
 * @param log the log's file name (`<number>.log`)
 */
export const logLinkName = (key: string, id: string, log: string): string => `${filesPrefix(key)}${logLinkPrefix(id)}${log}`;
/** The start of the names of open store `id`'s linked logs, in the key's files folder (`logLinkName`). */
export const logLinkPrefix = (id: string): string => `log-${id}-`;

/** The sequence number of a manifest object's name, or undefined for another object. */
export function sequenceOfManifest(key: string, name: string): number | undefined {
  const prefix = manifestsPrefix(key);
  if (!name.startsWith(prefix)) return undefined;
  const m = /^(\d{16})\.json$/.exec(name.slice(prefix.length));
  if (!m) return undefined;
  const n = Number(m[1]);
  return Number.isSafeInteger(n) ? n : undefined;
}

/** True for a valid file name in a checkpoint (a plain name, no path). */
export const isCheckpointFileName = (name: string): boolean => FILE_NAME.test(name);

/** How a manifest's payload of packed chunks is stored: as is, or compressed (RFC 1951 raw deflate). */
export type PackedEncoding = 'raw' | 'deflate-raw';

/**
 * The bytes of manifest `m`: its JSON, then, with `payload` (packed chunks), a newline and the
 * payload's bytes.
 * @param packing with a compressed payload: its encoding and its size once inflated, bytes
 */
export function encodeManifest(m: CheckpointManifest, payload?: readonly Uint8Array[], packing?: { readonly encoding: PackedEncoding; readonly rawBytes: number }): Buffer {
  const packed = payload !== undefined || m.files.some((f) => f.chunks?.some((c) => c.in !== undefined));
  const packedBytes = payload?.reduce((n, p) => n + p.length, 0);
  const encoded = payload !== undefined && packing !== undefined && packing.encoding !== 'raw' ? { packedEncoding: packing.encoding, packedRawBytes: packing.rawBytes } : {};
  const json = Buffer.from(JSON.stringify({
    format: packed ? MANIFEST_FORMAT_PACKED : m.files.some((f) => f.link) ? MANIFEST_FORMAT_LINKED : m.files.some((f) => f.chunks) ? MANIFEST_FORMAT_CHUNKED : MANIFEST_FORMAT,
    key: m.key,
    sequence: m.sequence,
    createdAt: m.createdAt,
    files: m.files.map((f) => (f.chunks
      ? { name: f.name, bytes: f.bytes, sha256: f.sha256, chunks: f.chunks.map((c) => (c.in !== undefined ? { bytes: c.bytes, sha256: c.sha256, in: c.in, at: c.at } : { bytes: c.bytes, sha256: c.sha256 })), ...(f.link ? { link: f.link } : {}) }
      : { name: f.name, bytes: f.bytes, sha256: f.sha256 })),
    metadata: Buffer.from(m.metadata).toString('base64'),
    ...(packedBytes !== undefined ? { packedBytes } : {}),
    ...encoded,
  }));
  return payload === undefined ? json : Buffer.concat([json, NEWLINE, ...payload]);
}

const NEWLINE = Buffer.from([0x0a]);

/**
 * Parses and checks a manifest read from `key`'s manifest of `sequence`.
 * @throws CheckpointDamagedError when it is not JSON or not a manifest of that key and sequence
 */
export function decodeManifest(key: string, sequence: number, bytes: Uint8Array): CheckpointManifest {
  return decodeManifestAndPayload(key, sequence, bytes).manifest;
}

/**
 * Like `decodeManifest`, with the payload of packed chunks the object holds after its JSON
 * (empty when none), as stored: `encoding` says how, `rawBytes` its size once decoded (the
 * bytes the chunks' offsets count).
 * @throws CheckpointDamagedError as `decodeManifest`, and when the payload's size is not the
 *   manifest's `packedBytes`, or a packed chunk of this manifest lies outside it
 */
export function decodeManifestAndPayload(key: string, sequence: number, bytes: Uint8Array): { manifest: CheckpointManifest; payload: Buffer; encoding: PackedEncoding; rawBytes: number } {
  const all = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = all.indexOf(0x0a);
  const payload = end < 0 ? Buffer.alloc(0) : all.subarray(end + 1);
  const packing: { encoding: PackedEncoding; rawBytes: number } = { encoding: 'raw', rawBytes: payload.length };
  const manifest = decodeJson(key, sequence, end < 0 ? all : all.subarray(0, end), end < 0 ? undefined : payload.length, packing);
  return { manifest, payload, ...packing };
}

/**
 * The JSON part of a manifest; `payloadBytes`: the size of the payload after it, if any.
 * @param packing set to the payload's encoding and decoded size
 */
function decodeJson(key: string, sequence: number, bytes: Buffer, payloadBytes: number | undefined, packing: { encoding: PackedEncoding; rawBytes: number } = { encoding: 'raw', rawBytes: payloadBytes ?? 0 }): CheckpointManifest {
  const damaged = (why: string): never => {
    throw new CheckpointDamagedError(`checkpoint ${key}@${sequence}: the manifest is damaged: ${why}`, key, sequence);
  };
  let raw: unknown;
  try {
    raw = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    return damaged(`not JSON (${(err as Error).message})`);
  }
  if (raw === null || typeof raw !== 'object') return damaged('not an object');
  const o = raw as Record<string, unknown>;
  if (!FORMATS.includes(o.format as string)) return damaged(`format ${JSON.stringify(o.format)}, expected one of ${FORMATS.join(', ')}`);
  if ((payloadBytes ?? 0) !== (o.packedBytes ?? 0) || (payloadBytes !== undefined && o.format !== MANIFEST_FORMAT_PACKED)) return damaged(`it holds ${payloadBytes ?? 0} bytes of packed chunks, its JSON says ${JSON.stringify(o.packedBytes ?? 0)} (format ${String(o.format)})`);
  if (o.packedEncoding !== undefined) {
    if (o.packedEncoding !== 'deflate-raw' || !Number.isSafeInteger(o.packedRawBytes) || (o.packedRawBytes as number) < 0) return damaged(`bad packed payload encoding ${JSON.stringify(o.packedEncoding)} (${JSON.stringify(o.packedRawBytes)} bytes)`);
    packing.encoding = 'deflate-raw';
    packing.rawBytes = o.packedRawBytes as number;
  } else {
    packing.rawBytes = payloadBytes ?? 0;
  }
  if (o.key !== key || o.sequence !== sequence) return damaged(`it names ${JSON.stringify(o.key)}@${String(o.sequence)}`);
  if (typeof o.createdAt !== 'string') return damaged('no createdAt');
  if (typeof o.metadata !== 'string') return damaged('no metadata');
  if (!Array.isArray(o.files)) return damaged('no file list');
  const files: CheckpointFile[] = [];
  const names = new Set<string>();
  let total = 0;
  for (const f of o.files as unknown[]) {
    const e = (f ?? {}) as Record<string, unknown>;
    if (typeof e.name !== 'string' || !isCheckpointFileName(e.name) || names.has(e.name)) return damaged(`bad or repeated file name ${JSON.stringify(e.name)}`);
    if (!Number.isSafeInteger(e.bytes) || (e.bytes as number) < 0) return damaged(`bad size of ${e.name}`);
    if (typeof e.sha256 !== 'string' || !SHA256.test(e.sha256)) return damaged(`bad sha256 of ${e.name}`);
    names.add(e.name);
    total += e.bytes as number;
    if (e.chunks === undefined) {
      if (e.link !== undefined) return damaged(`a link without chunks for ${e.name}`);
      files.push({ name: e.name, bytes: e.bytes as number, sha256: e.sha256 });
      continue;
    }
    if (o.format === MANIFEST_FORMAT || !Array.isArray(e.chunks) || e.chunks.length === 0) return damaged(`bad chunk list of ${e.name}`);
    const chunks: CheckpointChunk[] = [];
    let sum = 0;
    for (const c of e.chunks as unknown[]) {
      const k = (c ?? {}) as Record<string, unknown>;
      if (!Number.isSafeInteger(k.bytes) || (k.bytes as number) < 0 || typeof k.sha256 !== 'string' || !SHA256.test(k.sha256)) return damaged(`bad chunk of ${e.name}`);
      sum += k.bytes as number;
      if (k.in === undefined && k.at === undefined) {
        chunks.push({ bytes: k.bytes as number, sha256: k.sha256 });
        continue;
      }
      // Packed: in a manifest up to this one, inside this one's payload if it is this one's.
      const inOk = o.format === MANIFEST_FORMAT_PACKED && Number.isSafeInteger(k.in) && (k.in as number) >= 0 && (k.in as number) <= sequence && Number.isSafeInteger(k.at) && (k.at as number) >= 0;
      if (!inOk || (k.in === sequence && (k.at as number) + (k.bytes as number) > packing.rawBytes)) return damaged(`bad packed chunk of ${e.name}: in ${JSON.stringify(k.in)} at ${JSON.stringify(k.at)}`);
      chunks.push({ bytes: k.bytes as number, sha256: k.sha256, in: k.in as number, at: k.at as number });
    }
    if (sum !== e.bytes) return damaged(`the chunks of ${e.name} hold ${sum} bytes, the file ${String(e.bytes)}`);
    if (chunkListSha256(chunks) !== e.sha256) return damaged(`the sha256 of ${e.name} is not its chunks' hash list`);
    if (e.link !== undefined) {
      const prefix = filesPrefix(key);
      if ((o.format !== MANIFEST_FORMAT_LINKED && o.format !== MANIFEST_FORMAT_PACKED) || chunks.some((c) => c.in !== undefined) || typeof e.link !== 'string' || !e.link.startsWith(prefix) || !LINK_NAME.test(e.link.slice(prefix.length))) return damaged(`bad link of ${e.name}: ${JSON.stringify(e.link)}`);
      files.push({ name: e.name, bytes: e.bytes as number, sha256: e.sha256, chunks, link: e.link });
      continue;
    }
    files.push({ name: e.name, bytes: e.bytes as number, sha256: e.sha256, chunks });
  }
  return { key, sequence, createdAt: o.createdAt, files, bytes: total, metadata: new Uint8Array(Buffer.from(o.metadata, 'base64')) };
}
