import { mkdirSync, statSync } from 'node:fs';
import { mkdir, rmdir, stat } from 'node:fs/promises';
import path from 'node:path';

/**
 * `mkdir -p`: creates `dir` and its missing parents; an existing directory is fine.
 *
 * Not Node's `mkdir(dir, { recursive: true })`: on a parent that exists but cannot hold
 * children (a path under /proc or /sys, where mkdir answers ENOENT, not EACCES) that call
 * steps back to the parent on ENOENT and forward on EEXIST for ever, at 100% CPU, and never
 * returns (measured on Node 20 with `--checkpoints file:///proc/x`; the same loop was reported
 * against Bun's port of it, oven-sh/bun#40600). Here an ENOENT once the parent exists is final.
 * @throws the filesystem's error (ENOENT, EACCES, EROFS, ENOTDIR...) naming the path; an
 *   Error with code ENOTDIR when `dir` exists and is not a directory
 */
export async function mkdirs(dir: string): Promise<void> {
  try {
    await mkdir(dir);
    return;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return checkDirectory(dir, (await stat(dir)).isDirectory());
    if (code !== 'ENOENT') throw err;
  }
  const parent = path.dirname(dir);
  if (parent === dir) throw enoent(dir);
  await mkdirs(parent);
  try {
    await mkdir(dir); // ENOENT again, with the parent there: final
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    checkDirectory(dir, (await stat(dir)).isDirectory());
  }
}

/** {@link mkdirs}, synchronous. */
export function mkdirsSync(dir: string): void {
  try {
    mkdirSync(dir);
    return;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return checkDirectory(dir, statSync(dir).isDirectory());
    if (code !== 'ENOENT') throw err;
  }
  const parent = path.dirname(dir);
  if (parent === dir) throw enoent(dir);
  mkdirsSync(parent);
  try {
    mkdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    checkDirectory(dir, statSync(dir).isDirectory());
  }
}

/**
 * {@link mkdirs}, then checks that a directory can be made inside `dir` (and removes it):
 * what a store about to write files there needs, found at once instead of at its first
 * write in another thread.
 * @throws what {@link mkdirs} throws; the filesystem's error for the probe (EACCES, EROFS, ENOENT)
 */
export async function writableDirectory(dir: string): Promise<void> {
  await mkdirs(dir);
  const probe = path.join(dir, `.probe-${process.pid}-${Date.now()}`);
  await mkdir(probe);
  await rmdir(probe);
}

function checkDirectory(dir: string, isDirectory: boolean): void {
  if (!isDirectory) throw Object.assign(new Error(`ENOTDIR: not a directory, mkdir '${dir}'`), { code: 'ENOTDIR', path: dir });
}

function enoent(dir: string): Error {
  return Object.assign(new Error(`ENOENT: no such file or directory, mkdir '${dir}'`), { code: 'ENOENT', path: dir });
}
