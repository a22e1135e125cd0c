import { createWriteStream, readdirSync, renameSync, rmSync, type WriteStream } from 'node:fs';
import { once } from 'node:events';
import { basename, dirname, join } from 'node:path';

/**
 * A scores file (`url<TAB>score` lines) written to a file beside `out`
 * (`<out>.partial-<pid>`) and renamed over `out` once complete, so that a run that is refused,
 * fails or is stopped leaves an earlier `out` as it was, never empty or cut short. Opening it
 * removes the partial files of earlier runs whose process is gone (a SIGKILLed client's).
 */
export class ScoresFile {
  #written = false;

  private constructor(readonly out: string, readonly partial: string, readonly stream: WriteStream) {}

  /**
   * Removes stale partial files of `out`, then opens this process's (at once: a folder that
   * does not exist fails now, not after the job).
   * @throws the file system's errors (ENOENT for a missing folder, EACCES)
   */
  static async open(out: string): Promise<ScoresFile> {
    removeStalePartials(out);
    const partial = `${out}.partial-${process.pid}`;
    const stream = createWriteStream(partial);
    await once(stream, 'open');
    return new ScoresFile(out, partial, stream);
  }

  /** Writes every line, then renames the partial file over `out`. @throws the file system's errors */
  async write(scores: ReadonlyArray<readonly [string, number]>): Promise<void> {
    for (const [url, score] of scores) {
      if (!this.stream.write(`${url}\t${score}\n`)) await once(this.stream, 'drain');
    }
    this.stream.end();
    await once(this.stream, 'finish');
    renameSync(this.partial, this.out);
    this.#written = true;
  }

  /** Closes the stream and removes the partial file unless `write` renamed it (idempotent). */
  discard(): void {
    this.stream.destroy();
    if (!this.#written) rmSync(this.partial, { force: true });
  }
}

/**
 * Writes `url<TAB>score` lines to `out` through a {@link ScoresFile}.
 * @throws the file system's errors (the partial file is removed)
 */
export async function writeScoresFile(out: string, scores: ReadonlyArray<readonly [string, number]>): Promise<void> {
  const file = await ScoresFile.open(out);
  try {
    await file.write(scores);
  } finally {
    file.discard();
  }
}

/** Removes `<out>.partial-<pid>` files whose process no longer runs (signal 0 fails with ESRCH). */
function removeStalePartials(out: string): void {
  const prefix = `${basename(out)}.partial-`;
  let names: string[];
  try {
    names = readdirSync(dirname(out));
  } catch {
    return; // the folder is missing: open says so
  }
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(name.slice(prefix.length));
    if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) continue;
    try {
      process.kill(pid, 0);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ESRCH') rmSync(join(dirname(out), name), { force: true });
    }
  }
}
