import { InvalidArgumentError } from '../index.js';
import { createReadStream } from 'node:fs';
import { isUtf8 } from 'node:buffer';
import { Readable } from 'node:stream';

/**
 * A web graph in the plain format of the bundled graphs (examples/data, test/data, bench/data): `pages.txt` (one absolute URL per
 * line, every page) and `links.tsv` (`source<TAB>target` per line, duplicates and
 * self-links kept). Files ending in `.xz` are decompressed with `xz-decompress` (WASM, no
 * native build). A UTF-8 byte order mark (U+FEFF, as Windows tools write at the start of a
 * file, and as concatenated files carry in the middle) is no part of any URL: it is removed
 * from the start of every field of every line, in all three files (`field`).
 */
export interface WebGraph {
  /** Every page, in file order. */
  readonly pages: string[];
  /** Outlinks per page, in file order, duplicates kept. */
  readonly links: Map<string, string[]>;
  /** Link lines read (duplicates included). */
  readonly linkCount: number;
  /**
   * How many of `pages` (the first ones) the pages file lists; the others were added as a link's
   * endpoint. Absent: all of them (a graph built in code).
   */
  readonly listed?: number;
}

/**
 * Reads a graph. Links whose source or target is not in `pages` are kept and their
 * endpoints added as pages (a graph file may list only sources).
 * @throws InvalidArgumentError with the file and line number when a links line has no tab or
 *   more than one, an empty field, or a URL that is not `scheme://host...` (or holds white
 *   space or a control character)
 */
export async function readGraph(pagesFile: string, linksFile: string): Promise<WebGraph> {
  const pages: string[] = [];
  const known = new Set<string>();
  let n = 0;
  for await (const line of lines(pagesFile)) {
    n++;
    const url = field(line);
    if (url.length === 0 || known.has(url)) continue;
    checkUrl(url, pagesFile, n);
    known.add(url);
    pages.push(url);
  }
  const listed = pages.length;
  const links = new Map<string, string[]>();
  let linkCount = 0;
  n = 0;
  for await (const line of lines(linksFile)) {
    n++;
    if (field(line).length === 0) continue; // empty, or white space alone (as in pages.txt)
    const tab = line.indexOf('\t');
    if (tab < 0) throw new InvalidArgumentError(`${linksFile}:${n}: expected source<TAB>target`);
    if (line.indexOf('\t', tab + 1) >= 0) throw new InvalidArgumentError(`${linksFile}:${n}: expected source<TAB>target, found more than two tab-separated fields`);
    const source = field(line.slice(0, tab));
    const target = field(line.slice(tab + 1));
    if (source.length === 0 || target.length === 0) throw new InvalidArgumentError(`${linksFile}:${n}: empty ${source.length === 0 ? 'source' : 'target'} URL`);
    for (const u of [source, target]) {
      if (known.has(u)) continue;
      checkUrl(u, linksFile, n);
      known.add(u);
      pages.push(u);
    }
    let list = links.get(source);
    if (!list) links.set(source, (list = []));
    list.push(target);
    linkCount++;
  }
  return { pages, links, linkCount, listed };
}

/** An absolute URL's start: a scheme, `://`, then a host (RFC 3986 section 3). */
const ABSOLUTE_URL = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#\s]/;

/**
 * Refuses a graph file's URL that is not `scheme://host...` or holds white space or a control
 * character, naming the file and line (the load would refuse it later without them).
 * @throws InvalidArgumentError `<file>:<line>: ...`
 */
function checkUrl(url: string, file: string, line: number): void {
  if (!ABSOLUTE_URL.test(url)) throw new InvalidArgumentError(`${file}:${line}: ${JSON.stringify(url.slice(0, 200))} is not an absolute URL (scheme://host...)`);
  // eslint-disable-next-line no-control-regex
  if (/[\s\u0000-\u001f\u007f]/.test(url)) throw new InvalidArgumentError(`${file}:${line}: ${JSON.stringify(url.slice(0, 200))} holds white space or a control character`);
}

/** Reads `url<TAB>score` lines (a reference ranking) into a map. */
export async function readScores(file: string): Promise<Map<string, number>> {
  const scores = new Map<string, number>();
  for await (const line of lines(file)) {
    if (line.length === 0) continue;
    const tab = line.lastIndexOf('\t');
    scores.set(field(line.slice(0, tab)), Number(field(line.slice(tab + 1))));
  }
  return scores;
}

/**
 * One field of a graph file line, without byte order marks (U+FEFF) or white space around
 * it: `String.prototype.trim`, since ECMAScript counts U+FEFF as white space (ECMA-262,
 * "White Space": <ZWNBSP>). test/rank.graph-file-bom.test.ts holds it to that.
 */
export function field(text: string): string {
  return text.trim();
}

/**
 * Lines of a text file, `.xz` decompressed on the fly: split at LF, CRLF or a lone CR (as
 * `node:readline` splits), each decoded as UTF-8.
 * @throws InvalidArgumentError `<file>:<line>: not UTF-8 ...` for a line that is not valid
 *   UTF-8 (decoding it would put U+FFFD in its place, and two URLs differing only in their
 *   undecodable bytes would become one page); `<file>: not a valid .xz file ...` when the
 *   decompression fails
 */
export async function* lines(file: string): AsyncGenerator<string> {
  let input: AsyncIterable<Uint8Array> = createReadStream(file);
  if (file.endsWith('.xz')) {
    // xz-decompress is a CommonJS bundle: Node's ESM loader gives its exports as `default`
    // only (tsx's loader gave named ones too).
    const xz = (await import('xz-decompress')) as typeof import('xz-decompress') & { default?: typeof import('xz-decompress') };
    const XzReadableStream = xz.XzReadableStream ?? xz.default!.XzReadableStream;
    const web = new XzReadableStream(Readable.toWeb(input as Readable) as unknown as ReadableStream<Uint8Array>);
    input = xzErrors(file, Readable.fromWeb(web as unknown as import('node:stream/web').ReadableStream<Uint8Array>));
  }
  let carry: Buffer = Buffer.alloc(0);
  let line = 0;
  /** The lines of `bytes` (whole lines, or the file's last part), checked and decoded. */
  const decode = (bytes: Buffer): string[] => {
    if (!isUtf8(bytes)) {
      // Find the line, for the message.
      let from = 0;
      for (let k = 1; ; k++) {
        let end = bytes.indexOf(10, from);
        if (end < 0) end = bytes.length;
        if (!isUtf8(bytes.subarray(from, end))) {
          throw new InvalidArgumentError(`${file}:${line + k}: not UTF-8 (bytes that no UTF-8 decoder reads: re-encode the file as UTF-8, or percent-encode those bytes in the URL)`);
        }
        from = end + 1;
      }
    }
    const text = bytes.toString('utf8');
    const parts = text.includes('\r') ? text.split(LINE_BREAK) : text.split('\n');
    line += parts.length;
    return parts;
  };
  for await (const chunk of input) {
    const bytes = carry.length > 0 ? Buffer.concat([carry, chunk]) : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const last = bytes.lastIndexOf(10);
    if (last < 0) {
      carry = Buffer.from(bytes);
      continue;
    }
    // Whole lines up to the last LF (a CR before it is the CRLF's); the rest waits for more.
    const parts = decode(bytes.subarray(0, last > 0 && bytes[last - 1] === 13 ? last - 1 : last));
    carry = Buffer.from(bytes.subarray(last + 1));
    yield* parts;
  }
  if (carry.length > 0) {
    // The last line, without its break (readline yields no empty line after a final break).
    const parts = decode(carry);
    if (parts.at(-1) === '') parts.pop();
    yield* parts;
  }
}

/** Line breaks as `node:readline` reads them: CRLF, LF, or a CR alone. */
const LINE_BREAK = /\r\n|\n|\r/;

/** Decompressed bytes of an `.xz` file whose failures name the file. */
async function* xzErrors(file: string, input: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  try {
    yield* input;
  } catch (err) {
    throw new InvalidArgumentError(`${file}: not a valid .xz file (${err instanceof Error ? err.message : String(err)})`, { cause: err });
  }
}
