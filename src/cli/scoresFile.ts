import { createWriteStream, renameSync, rmSync } from 'node:fs';
import { once } from 'node:events';

/**
 * Writes `url<TAB>score` lines to a file beside `out`, renamed over `out` once complete, so a
 * failure leaves an earlier `out` as it was, never cut short.
 * @throws the file system's errors (the partial file is removed)
 */
export async function writeScoresFile(out: string, scores: ReadonlyArray<readonly [string, number]>): Promise<void> {
  const partial = `${out}.partial-${process.pid}`;
  const stream = createWriteStream(partial);
  try {
    await once(stream, 'open');
    for (const [url, score] of scores) {
      if (!stream.write(`${url}\t${score}\n`)) await once(stream, 'drain');
    }
    stream.end();
    await once(stream, 'finish');
    renameSync(partial, out);
  } catch (err) {
    stream.destroy();
    rmSync(partial, { force: true });
    throw err;
  }
}
