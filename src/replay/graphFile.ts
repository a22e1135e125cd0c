import { InvalidArgumentError } from '../index.js';
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
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
  const links = new Map<string, string[]>();
  let linkCount = 0;
  n = 0;
  for await (const line of lines(linksFile)) {
    n++;
    if (line.length === 0) continue;
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
  return { pages, links, linkCount };
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

/** Lines of a text file, `.xz` decompressed on the fly. */
export async function* lines(file: string): AsyncGenerator<string> {
  let input: Readable = createReadStream(file);
  if (file.endsWith('.xz')) {
    const { XzReadableStream } = await import('xz-decompress');
    const web = new XzReadableStream(Readable.toWeb(input) as unknown as ReadableStream<Uint8Array>);
    input = Readable.fromWeb(web as unknown as import('node:stream/web').ReadableStream<Uint8Array>);
  }
  yield* createInterface({ input, crlfDelay: Infinity });
}
