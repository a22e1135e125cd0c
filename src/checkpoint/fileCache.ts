/**
 * A local folder of checkpoint content kept by SHA-256, which a restore takes instead of
 * fetching it: a warm standby's (docs/checkpoints.md, "Warm standbys").
 */
import { createHash, randomBytes } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import { copyFile, link, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { mkdirs } from '../storage/mkdirs.js';
import { fileThreads } from './fileThreads.js';

const SHA256_NAME = /^[0-9a-f]{64}$/;
const TEMP_PREFIX = '.tmp-';

/** What `CheckpointFileCache.retain` removed. */
export interface CheckpointCacheRetainReport {
  readonly removedFiles: number;
  readonly removedBytes: number;
  /** Files and bytes left. */
  readonly files: number;
  readonly bytes: number;
}

/**
 * Checkpoint content (whole files, WAL chunks) on local disk, one file per
 * content named by its SHA-256 (64 hex digits). Only content checked against its digest on
 * the way in (`IncrementalCheckpointStore.warm` fetches and checks it as a restore does) is
 * added, by a rename from a temporary sibling, so a process killed while adding leaves only a
 * temporary file, which `retain` removes. A restore takes a whole file by a hard link (a copy
 * for a file the restored store may write to, or across filesystems), a chunk by reading it,
 * each after checking its size and SHA-256 again (a local read and hash instead of a
 * download: a file renamed in before a power loss may read back other than it was written);
 * content that fails the check is removed and fetched.
 *
 * The model: Kafka Streams' standby replicas (`num.standby.replicas`), which keep a task's
 * state warm on another instance so that a fail-over replays only the tail (KIP-441); here
 * the state is the latest checkpoint's files, fetched as checkpoints are made.
 */
export class CheckpointFileCache {
  /** @param dir the cache's folder (made when the first content is added) */
  constructor(readonly dir: string) {}

  /** Where content `sha256` is (or would be). */
  pathOf(sha256: string): string {
    return path.join(this.dir, sha256);
  }

  /** Bytes of content `sha256` when cached (a file), else undefined; a cache that cannot be read counts as empty. */
  async bytesOf(sha256: string): Promise<number | undefined> {
    try {
      const st = await stat(this.pathOf(sha256));
      return st.isFile() ? st.size : undefined;
    } catch {
      return undefined; // ENOENT; ENOTDIR when the cache's folder is a file; EACCES
    }
  }

  /**
   * Adds content that was checked against `sha256`: `bytes`, or the file at `from` (moved in).
   * @throws the filesystem's errors
   */
  async add(sha256: string, content: { readonly bytes: Uint8Array } | { readonly from: string }): Promise<void> {
    await mkdirs(this.dir);
    const target = this.pathOf(sha256);
    // Whatever else holds the name (a folder, a damaged copy) goes first: a rename onto a folder fails.
    if ((await this.bytesOf(sha256)) === undefined) await rm(target, { recursive: true, force: true });
    if ('from' in content) {
      await rename(content.from, target);
      return;
    }
    const tmp = this.tempPath();
    await writeFile(tmp, content.bytes);
    await rename(tmp, target);
  }

  /** A fresh temporary name in the cache's folder (for content being fetched; `retain` removes leftovers). */
  tempPath(): string {
    return path.join(this.dir, `${TEMP_PREFIX}${randomBytes(6).toString('hex')}`);
  }

  /**
   * Makes `target` (which must not exist) hold content `sha256` of `bytes` bytes: a hard link
   * (a copy with `copy`, for a file its user may write to, or when the cache is on another
   * filesystem).
   * @returns false when the content is not cached (or has another size or digest: then it is removed)
   */
  async linkTo(sha256: string, bytes: number, target: string, options: { readonly copy?: boolean } = {}): Promise<boolean> {
    const source = this.pathOf(sha256);
    // Checked again before use: a rename is atomic against a kill, not against a power loss
    // (a file renamed before its data reached the disk may read back as zeros). A cache that
    // cannot be read (a folder in a file's place, the cache's folder a file, no permission)
    // is as good as empty: the restore fetches, never fails for it.
    let good = false;
    try {
      const st = await stat(source);
      good = st.isFile() && st.size === bytes && (await fileThreads().hash(source)) === sha256;
    } catch {
      good = false;
    }
    if (!good) {
      await this.#drop(source);
      return false;
    }
    try {
      if (options.copy) await copyFile(source, target, fsConstants.COPYFILE_EXCL);
      else {
        try {
          await link(source, target);
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          if (code !== 'EXDEV' && code !== 'EPERM') throw err;
          await copyFile(source, target, fsConstants.COPYFILE_EXCL);
        }
      }
      return true;
    } catch {
      // Removed by a retain meanwhile, or the copy failed: the caller fetches into `target` instead.
      await rm(target, { force: true }).catch(() => {});
      return false;
    }
  }

  /** Content `sha256` when cached with `bytes` bytes and that digest, else undefined (removed when it differs; a cache that cannot be read counts as empty). */
  async read(sha256: string, bytes: number): Promise<Buffer | undefined> {
    let data: Buffer;
    try {
      data = await readFile(this.pathOf(sha256));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') await this.#drop(this.pathOf(sha256));
      return undefined;
    }
    if (data.length === bytes && createHash('sha256').update(data).digest('hex') === sha256) return data;
    await this.#drop(this.pathOf(sha256));
    return undefined;
  }

  /** Removes what holds a content's name, whatever it is; a failure is left for `retain`. */
  async #drop(p: string): Promise<void> {
    await rm(p, { recursive: true, force: true }).catch(() => {});
  }

  /**
   * Removes every cached content not in `keep` (SHA-256s), and leftover temporary files not
   * touched for a minute (a fetch in flight writes its own).
   */
  async retain(keep: ReadonlySet<string>): Promise<CheckpointCacheRetainReport> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { removedFiles: 0, removedBytes: 0, files: 0, bytes: 0 };
      throw err;
    }
    let removedFiles = 0;
    let removedBytes = 0;
    let files = 0;
    let bytes = 0;
    const now = Date.now();
    for (const name of names) {
      const p = path.join(this.dir, name);
      const st = await stat(p).catch(() => undefined);
      if (!st) continue;
      const stale = name.startsWith(TEMP_PREFIX) ? now - st.mtimeMs > 60_000 : !SHA256_NAME.test(name) || !keep.has(name);
      if (!stale) {
        if (!name.startsWith(TEMP_PREFIX)) {
          files++;
          bytes += st.size;
        }
        continue;
      }
      await rm(p, { force: true, recursive: true });
      removedFiles++;
      removedBytes += st.size;
    }
    return { removedFiles, removedBytes, files, bytes };
  }
}
