/**
 * Checkpoint objects in a directory (`file:///DIR`): object `a/b/c` is the file `DIR/a/b/c`.
 * Meant for a filesystem every machine mounts (NFS, a shared volume), and for one machine.
 *
 * An object is written as a temporary file beside its final name (`.tmp-<random>` suffix),
 * flushed to disk (fsync) and renamed over the name, so that a crash never leaves a partial
 * file under an object's name; the folder is synced at once for `putBytes` (the manifest, a
 * checkpoint's commit point) and at `sync()` for `putFile` (once per put for all its files,
 * before its manifest). Listings skip temporary files
 * younger than an hour (a write in progress) and list older ones (left by a crash) like
 * any object, so that `collect`, which deletes what no manifest uses, removes them.
 */
import { copyFile, mkdir, open, readdir, readFile, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { forEachLimit } from './limit.js';
import type { CheckpointObjects, ListedObject } from './objects.js';

const TMP_MARK = '.tmp-';
/** A temporary file older than this is a crash's leftover, listed so that it is collected. */
const STALE_TMP_MS = 3_600_000;
/** Files stat'ed at once by a listing. */
const LIST_STAT_CONCURRENCY = 16;

export class DirectoryObjects implements CheckpointObjects {
  readonly url: string;

  /** @param root absolute path of the store's directory (created on first write) */
  constructor(private readonly root: string) {
    this.url = pathToFileURL(root).href;
  }

  #path(name: string): string {
    return path.join(this.root, ...name.split('/'));
  }

  /** Folders that `putFile` renamed objects into since the last `sync()`. */
  readonly #unsynced = new Set<string>();
  /** The latest `sync()`'s folder syncs (and, through it, every earlier one's). */
  #syncing: Promise<void> = Promise.resolve();

  /**
   * Writes `name` through a temporary file (fsynced, renamed); returns the folder to sync.
   * @param write writes the temporary file; when it returns its still open handle, that one
   *   is synced and closed (else the file is opened again for the sync)
   */
  async #commit(name: string, write: (tmp: string) => Promise<FileHandle | void>): Promise<string> {
    const final = this.#path(name);
    const dir = path.dirname(final);
    await mkdir(dir, { recursive: true });
    const tmp = `${final}${TMP_MARK}${randomBytes(6).toString('hex')}`;
    try {
      const fh = (await write(tmp)) ?? (await open(tmp, 'r+'));
      try {
        await fh.sync();
      } finally {
        await fh.close();
      }
      await rename(tmp, final);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
    return dir;
  }

  async putFile(name: string, localPath: string): Promise<void> {
    this.#unsynced.add(await this.#commit(name, (tmp) => copyFile(localPath, tmp)));
  }

  async sync(): Promise<void> {
    const dirs = [...this.#unsynced];
    this.#unsynced.clear();
    // Also wait for the syncs other callers started: a folder taken from the set by a
    // concurrent sync() is synced by it, and this sync() must not return before that.
    const done = Promise.all([this.#syncing, ...dirs.map(syncDir)]).then(() => undefined);
    this.#syncing = done;
    await done;
  }

  async putBytes(name: string, bytes: Uint8Array): Promise<void> {
    const dir = await this.#commit(name, async (tmp) => {
      const fh = await open(tmp, 'wx');
      try {
        await fh.writeFile(bytes);
      } catch (err) {
        await fh.close();
        throw err;
      }
      return fh; // synced and closed by #commit
    });
    await syncDir(dir);
  }

  async getBytes(name: string): Promise<Buffer | undefined> {
    try {
      return await readFile(this.#path(name));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async getStream(name: string): Promise<Readable | undefined> {
    const p = this.#path(name);
    // Opened before it is handed out, so that a missing file is `undefined`, not a stream error.
    let fh;
    try {
      fh = await open(p, 'r');
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
    return fh.createReadStream(); // closes the handle at its end or on error
  }

  async list(prefix: string): Promise<ListedObject[]> {
    const dir = this.#path(prefix);
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true, recursive: true });
    } catch (err) {
      if (isNotFound(err)) return [];
      throw err;
    }
    const files = entries.filter((e) => e.isFile());
    const listed: Array<ListedObject | undefined> = new Array(files.length);
    // Several stats at once: a key's folder holds a file per distinct SST of its kept checkpoints.
    await forEachLimit(files, LIST_STAT_CONCURRENCY, async (e, i) => {
      const full = path.join(e.parentPath, e.name);
      const st = await stat(full).catch((err: unknown) => (isNotFound(err) ? undefined : Promise.reject(err)));
      if (!st) return; // deleted meanwhile
      if (e.name.includes(TMP_MARK) && Date.now() - st.mtimeMs < STALE_TMP_MS) return;
      listed[i] = { name: prefix + path.relative(dir, full).split(path.sep).join('/'), bytes: st.size };
    });
    return listed.filter((o): o is ListedObject => o !== undefined);
  }

  async delete(names: readonly string[]): Promise<void> {
    for (const name of names) await rm(this.#path(name), { force: true });
  }

  async close(): Promise<void> {
    // nothing held open
  }
}

function isNotFound(err: unknown): boolean {
  return (err as NodeJS.ErrnoException | null)?.code === 'ENOENT';
}

/** fsync of a directory, so that a rename in it survives a crash (POSIX; a no-op where refused). */
async function syncDir(dir: string): Promise<void> {
  let fh;
  try {
    fh = await open(dir, 'r');
    await fh.sync();
  } catch {
    // some filesystems refuse fsync on a directory (EISDIR/EINVAL): the rename is all we have
  } finally {
    await fh?.close();
  }
}
