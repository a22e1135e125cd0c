/** A decoded body and how its encoding was chosen. */
export interface DecodedBody {
  readonly text: string;
  /** The WHATWG encoding name used, e.g. `utf-8`, `windows-1252`, `shift_jis`. */
  readonly encoding: string;
  /** Where the encoding came from. */
  readonly source: 'bom' | 'header' | 'meta' | 'default';
  /** Set when a declared charset was unknown and the default was used instead. */
  readonly note?: string;
}

const PRESCAN_BYTES = 1024;

/**
 * Decodes an HTML body to text, choosing the encoding as the HTML standard's "encoding
 * sniffing" does, in order:
 * 1. a byte order mark (UTF-8 `EF BB BF`, UTF-16LE `FF FE`, UTF-16BE `FE FF`);
 * 2. the `charset` parameter of the `Content-Type` header;
 * 3. a prescan of the first 1024 bytes for `<meta charset="…">` or
 *    `<meta http-equiv="Content-Type" content="…; charset=…">` (a declared UTF-16 is read as
 *    UTF-8, as the standard says: the bytes could not have been read to find it otherwise);
 * 4. UTF-8.
 * Labels are WHATWG labels (`latin1` and `iso-8859-1` mean windows-1252; `x-sjis` means
 * Shift_JIS); an unknown label falls through to the next step and is reported in `note`.
 * Invalid byte sequences become U+FFFD.
 *
 * @param bytes the raw body
 * @param contentType the `Content-Type` header value, or '' when absent
 */
export function decodeBody(bytes: Uint8Array, contentType: string): DecodedBody {
  const bom = sniffBom(bytes);
  if (bom) return { text: new TextDecoder(bom.encoding, { ignoreBOM: false }).decode(bytes), encoding: bom.encoding, source: 'bom' };
  const notes: string[] = [];
  const header = /charset\s*=\s*["']?([^;"'\s]+)/i.exec(contentType)?.[1];
  if (header) {
    const d = decoderFor(header);
    if (d) return { text: d.decode(bytes), encoding: d.encoding, source: 'header' };
    notes.push(`unknown charset ${JSON.stringify(header)} in Content-Type`);
  }
  const meta = prescanMeta(bytes);
  if (meta) {
    const label = /^utf-16(be|le)?$/i.test(meta) ? 'utf-8' : meta;
    const d = decoderFor(label);
    if (d) return { text: d.decode(bytes), encoding: d.encoding, source: 'meta', ...(notes.length ? { note: notes.join('; ') } : {}) };
    notes.push(`unknown charset ${JSON.stringify(meta)} in <meta>`);
  }
  return { text: new TextDecoder('utf-8').decode(bytes), encoding: 'utf-8', source: 'default', ...(notes.length ? { note: notes.join('; ') } : {}) };
}

function sniffBom(b: Uint8Array): { encoding: string } | undefined {
  if (b.length >= 3 && b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf) return { encoding: 'utf-8' };
  if (b.length >= 2 && b[0] === 0xff && b[1] === 0xfe) return { encoding: 'utf-16le' };
  if (b.length >= 2 && b[0] === 0xfe && b[1] === 0xff) return { encoding: 'utf-16be' };
  return undefined;
}

/** A decoder: `encoding` (WHATWG name) and `decode`. */
interface Decoder {
  readonly encoding: string;
  decode(bytes: Uint8Array): string;
}

/**
 * windows-1252 bytes 0x80..0x9F (WHATWG index); Node 20's TextDecoder decodes that label
 * as ISO-8859-1 and yields C1 controls there instead (`0x80` must be `€`).
 */
const CP1252_HIGH = '\u20ac\u0081\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\u008d\u017d\u008f' +
  '\u0090\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\u009d\u017e\u0178';

function decoderFor(label: string): Decoder | undefined {
  let d: InstanceType<typeof TextDecoder>;
  try {
    d = new TextDecoder(label.trim().toLowerCase());
  } catch {
    return undefined;
  }
  if (d.encoding !== 'windows-1252') return d;
  return {
    encoding: 'windows-1252',
    decode: (bytes) => d.decode(bytes).replace(/[\u0080-\u009f]/g, (c) => CP1252_HIGH[c.charCodeAt(0) - 0x80]!),
  };
}

/** The charset label declared by a `<meta>` in the first 1024 bytes, read as ASCII. */
function prescanMeta(bytes: Uint8Array): string | undefined {
  const head = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.byteLength, PRESCAN_BYTES)).toString('latin1');
  const metas = head.match(/<meta\b[^>]*>/gi) ?? [];
  for (const tag of metas) {
    const charset = /\bcharset\s*=\s*["']?\s*([^"'\s/>;]+)/i.exec(tag)?.[1];
    if (charset) return charset;
  }
  return undefined;
}
