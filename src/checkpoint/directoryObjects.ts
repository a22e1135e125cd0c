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
 *
 * Writes, folder syncs, listings and deletes run on the checkpoint file threads (fileThreads.ts): one
 * message per object instead of a chain of promise-based `fs` calls through the libuv pool.
 */
import { open, readFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { fileThreads } from './fileThreads.js';
import { writableDirectory } from '../storage/mkdirs.js';
import type { CheckpointObjects, ListedObject } from './objects.js';

const TMP_MARK = '.tmp-';
/** A temporary file older than this is a crash's leftover, listed so that it is collected. */
const STALE_TMP_MS = 3_600_000;

export class DirectoryObjects implements CheckpointObjects {
  readonly url: string;

  /** @param root absolute path of the store's directory (created on first write) */
  constructor(private readonly root: string) {
    this.url = pathToFileURL(root).href;
  }

  /** The root made and checked writable, once, before the first write (`writableDirectory`). */
  #writable: Promise<void> | undefined;

  /** @throws Error naming the store's directory when it cannot be made or written (its cause the filesystem's error) */
  #ready(): Promise<void> {
    this.#writable ??= writableDirectory(this.root).catch((cause: unknown) => {
      this.#writable = undefined; // a later write tries again (a mount that came back)
      throw new Error(`checkpoint store ${this.url}: its directory cannot be created or written (${(cause as Error).message})`, { cause });
    });
    return this.#writable;
  }

  #path(name: string): string {
    return path.join(this.root, ...name.split('/'));
  }

  localPath(name: string): string {
    return this.#path(name);
  }

  /** Folders that `putFile` renamed objects into since the last `sync()`. */
  readonly #unsynced = new Set<string>();
  /** The latest `sync()`'s folder syncs (and, through it, every earlier one's). */
  #syncing: Promise<void> = Promise.resolve();

  /** A temporary path beside `final`. */
  #tmp(final: string): string {
    return `${final}${TMP_MARK}${randomBytes(6).toString('hex')}`;
  }

  async putFile(name: string, localPath: string, _bytes?: number, options: { readonly immutable?: boolean } = {}): Promise<void> {
    await this.#ready();
    const final = this.#path(name);
    await fileThreads().copy(localPath, final, this.#tmp(final), { link: options.immutable === true });
    this.#unsynced.add(path.dirname(final));
  }

  async sync(): Promise<void> {
    const dirs = [...this.#unsynced];
    this.#unsynced.clear();
    // Also wait for the syncs other callers started: a folder taken from the set by a
    // concurrent sync() is synced by it, and this sync() must not return before that.
    const done = Promise.all([this.#syncing, fileThreads().syncDirs(dirs)]).then(() => undefined);
    this.#syncing = done;
    await done;
  }

  async putBytes(name: string, bytes: Uint8Array): Promise<void> {
    await this.#ready();
    const final = this.#path(name);
    await fileThreads().write([{ file: final, tmp: this.#tmp(final), bytes }], { syncDirs: true });
  }

  async putAllThen(first: ReadonlyArray<{ readonly name: string; readonly bytes: Uint8Array }>, last: { readonly name: string; readonly bytes: Uint8Array }): Promise<void> {
    await this.#ready();
    // One thread message: the temporary files written and fsynced, then `first` renamed and
    // their folders synced, then `last` renamed and its folder synced (fileThreads' `write`).
    const writes = [...first, last].map((o) => {
      const final = this.#path(o.name);
      return { file: final, tmp: this.#tmp(final), bytes: o.bytes };
    });
    await fileThreads().write(writes, { syncDirs: true });
  }

  async getBytes(name: string): Promise<Buffer | undefined> {
    try {
      return await readFile(this.#path(name));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async getRange(name: string, offset: number, length: number): Promise<Buffer | undefined> {
    let fh;
    try {
      fh = await open(this.#path(name), 'r');
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
    try {
      const buf = Buffer.alloc(Math.max(0, length));
      let got = 0;
      while (got < buf.length) {
        const { bytesRead } = await fh.read(buf, got, buf.length - got, offset + got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
      return buf.subarray(0, got);
    } finally {
      await fh.close();
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
    const now = Date.now();
    const files = await fileThreads().list(this.#path(prefix));
    return files.filter((f) => !(f.relative.includes(TMP_MARK) && now - f.mtimeMs < STALE_TMP_MS)).map((f) => ({ name: prefix + f.relative, bytes: f.bytes }));
  }

  async delete(names: readonly string[]): Promise<void> {
    // In order, in one message to a file thread (a collect removes a few manifests and log
    // chunks after most puts: one `rm` each through the libuv pool and back to a busy main
    // thread took a collect 130 ms, median, on cnr-2000).
    await fileThreads().remove(names.map((name) => this.#path(name)));
  }

  async close(): Promise<void> {
    // nothing held open
  }
}

function isNotFound(err: unknown): boolean {
  return (err as NodeJS.ErrnoException | null)?.code === 'ENOENT';
}
