import { readFile } from 'node:fs/promises';

/** One static file of the console page, ready to serve. */
export interface PageAsset {
  /** `content-type` header value. */
  readonly contentType: string;
  /** The file's bytes (UTF-8 text). */
  readonly body: Buffer;
}

/** URL path -> file next to this module. The page is plain HTML, CSS and JS: no build step. */
const FILES: ReadonlyArray<readonly [path: string, file: string, contentType: string]> = [
  ['/', 'page.html', 'text/html; charset=utf-8'],
  ['/page.js', 'page.js', 'text/javascript; charset=utf-8'],
  ['/page.css', 'page.css', 'text/css; charset=utf-8'],
];

/**
 * Reads the console page's files (`page.html`, `page.js`, `page.css` beside this module) once,
 * keyed by the URL path they are served at (`/`, `/page.js`, `/page.css`).
 * @throws (rejects) the `readFile` error (e.g. `ENOENT`) if a file is missing from the install.
 */
export async function loadPageAssets(): Promise<ReadonlyMap<string, PageAsset>> {
  const entries = await Promise.all(
    FILES.map(async ([path, file, contentType]) => [path, { contentType, body: await readFile(new URL(file, import.meta.url)) }] as const),
  );
  return new Map(entries);
}
