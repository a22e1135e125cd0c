import { decodeRecord } from '../../index.js';
import type { PackedKeys } from '../../storage/index.js';

/**
 * The value of a backlink in `backlinks` (key `target 0x00 source`): a `record` merge value
 * (src/operators/mergeOperators.ts, `shardflow.record.v1`, every field last write wins), a
 * msgpack map of two fields written by two writers that never read it:
 * - `v` (bin): the link value as `outlinks` holds it (float64 LE raw weight, then msgpack
 *   LinkFeatures: anchor text, rel, region...), written by the backlinks actor from the
 *   crawler's link operations (`encodeBacklinkLink`);
 * - `m` (float64): the copy of the source's metric, its rank estimate x_p (unnormalised),
 *   written by the metric actors (`encodeBacklinkCopy`) when the source's x moved by more
 *   than COPY_RELATIVE_BOUND since the copy was last sent (docs/ARCHITECTURE.md,
 *   "Backlinks carry their source's metric").
 * Each writer merges its own field, so neither erases the other's. A value without `v` is a
 * copy whose link was removed before it arrived, or whose add has not arrived yet: readers
 * skip it (`decodeBacklink` returns `link: undefined`).
 */
export interface Backlink {
  /** The link value (`linkValue.ts` layout), absent for a copy without its link. */
  readonly link: Buffer | undefined;
  /** The copy of the source's x, absent until the first copy arrived. */
  readonly metric: number | undefined;
}

/**
 * The largest relative difference between a source page's rank estimate x_p and the copy
 * of it that its backlinks hold once the copy's messages are applied: a metric actor sends
 * a new copy when |x_p - copy| > COPY_RELATIVE_BOUND |x_p| after a push. 5%: chosen so
 * that the copies of a full computation cost a few sends per link (x of a page grows
 * geometrically to its limit, so the sends per page are about
 * 1 + ln(x_final / x_first) / ln(1.05)); the figures are in `npm run -s bench -- query --json`.
 */
export const COPY_RELATIVE_BOUND = 0.05;

/** True when a copy `sent` (NaN: none sent) of a page whose x is now `x` must be sent again (see COPY_RELATIVE_BOUND). */
export function copyStale(sent: number, x: number): boolean {
  return !(Math.abs(x - sent) <= COPY_RELATIVE_BOUND * Math.abs(x));
}

// msgpack by hand (the operands are written per link): fixmap of 1 (0x81), fixstr "v" or
// "m" (0xa1, the letter), then bin 8/16/32 (0xc4/0xc5/0xc6, big-endian length) or
// float 64 (0xcb, big-endian), as the msgpack spec lays them out.
const V = 0x76;
const M = 0x6d;

/** The `record` operand that sets a backlink's link value (`encodeLinkValue`'s bytes), keeping its copy. */
export function encodeBacklinkLink(linkValue: Uint8Array): Buffer {
  const n = linkValue.byteLength;
  const head = n < 0x100 ? 5 : n < 0x10000 ? 6 : 8;
  const out = Buffer.allocUnsafe(head + n);
  out[0] = 0x81;
  out[1] = 0xa1;
  out[2] = V;
  if (n < 0x100) {
    out[3] = 0xc4;
    out[4] = n;
  } else if (n < 0x10000) {
    out[3] = 0xc5;
    out.writeUInt16BE(n, 4);
  } else {
    out[3] = 0xc6;
    out.writeUInt32BE(n, 4);
  }
  out.set(linkValue, head);
  return out;
}

/** The `record` operand that sets a backlink's copy of its source's x, keeping the link's fields (12 bytes). */
export function encodeBacklinkCopy(x: number): Buffer {
  const out = Buffer.allocUnsafe(12);
  writeCopyOperand(out, 0, x);
  return out;
}

/** Writes the 12-byte copy operand of `x` at `out[at]`. */
function writeCopyOperand(out: Buffer, at: number, x: number): void {
  out[at] = 0x81;
  out[at + 1] = 0xa1;
  out[at + 2] = M;
  out[at + 3] = 0xcb;
  out.writeDoubleBE(x, at + 4);
}

/**
 * The `record` operands of `encodeBacklinkCopy` for each of `xs`, packed in one buffer
 * (12 bytes each): what `WriteBatch.mergePairRuns` takes for a message's copies, with no
 * Buffer per copy.
 */
export function encodeBacklinkCopies(xs: Float64Array): PackedKeys {
  const bytes = Buffer.allocUnsafe(12 * xs.length);
  const ends = new Uint32Array(xs.length);
  for (let i = 0; i < xs.length; i++) {
    writeCopyOperand(bytes, 12 * i, xs[i]!);
    ends[i] = 12 * i + 12;
  }
  return { bytes, ends };
}

/**
 * Reads a stored backlink value: a fast path for the maps this module and the native
 * `record` operator write (fixmap of fixstr keys, bin and float 64 values), msgpackr for
 * anything else.
 * @throws the msgpack decoder's error for bytes that are not msgpack (a store written
 *   before backlinks were records is refused at open: its `backlinks` family has no merge
 *   operator, MergeOperatorMismatchError)
 */
export function decodeBacklink(value: Uint8Array): Backlink {
  const b = Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  const fast = decodeFast(b);
  if (fast) return fast;
  const r = decodeRecord<{ v?: Uint8Array; m?: number }>(b);
  const v = r.v;
  return {
    link: v instanceof Uint8Array ? Buffer.from(v.buffer, v.byteOffset, v.byteLength) : undefined,
    metric: typeof r.m === 'number' ? r.m : undefined,
  };
}

function decodeFast(b: Buffer): Backlink | undefined {
  if (b.length === 0 || (b[0]! & 0xf0) !== 0x80) return undefined;
  const n = b[0]! & 0x0f;
  let p = 1;
  let link: Buffer | undefined;
  let metric: number | undefined;
  for (let i = 0; i < n; i++) {
    if (p + 2 > b.length || b[p] !== 0xa1) return undefined;
    const name = b[p + 1];
    p += 2;
    const tag = b[p];
    if (name === V && (tag === 0xc4 || tag === 0xc5 || tag === 0xc6)) {
      const head = tag === 0xc4 ? 2 : tag === 0xc5 ? 3 : 5;
      if (p + head > b.length) return undefined;
      const len = tag === 0xc4 ? b[p + 1]! : tag === 0xc5 ? b.readUInt16BE(p + 1) : b.readUInt32BE(p + 1);
      if (p + head + len > b.length) return undefined;
      link = b.subarray(p + head, p + head + len);
      p += head + len;
    } else if (name === M && tag === 0xcb && p + 9 <= b.length) {
      metric = b.readDoubleBE(p + 1);
      p += 9;
    } else return undefined;
  }
  return p === b.length ? { link, metric } : undefined;
}
