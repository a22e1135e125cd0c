import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DataDirError } from '../../errors.js';
import { mkdirsSync } from '../../storage/mkdirs.js';

/**
 * The pid in the lock file `file` when that process is alive (and is not this one), else
 * undefined (no lock file, or a stale one: its process was killed). Liveness is
 * `kill(pid, 0)` (POSIX: EPERM means alive, under another user).
 */
export function lockFileHolder(file: string): number | undefined {
  const pid = lockFilePid(file);
  if (pid === undefined || pid === process.pid) return undefined;
  try {
    process.kill(pid, 0);
    return pid;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM' ? pid : undefined;
  }
}

/** A held data dir lock. */
export interface DataDirLock {
  /** The lock file's path. */
  readonly file: string;
  /** Removes the lock file if it still names this process. Idempotent. */
  release(): void;
}

/** Options of {@link acquireDataDirLock}. */
export interface DataDirLockOptions {
  /** The lock file's name inside the data dir, e.g. `topology.lock`. */
  readonly file: string;
  /** The refusal's message when live process `holder` holds the lock file `file`: what holds it and what to do. */
  readonly inUse: (holder: number, file: string) => string;
  /** Called when a lock left by process `pid`, no longer running, is taken over (default: nothing). */
  readonly onStale?: (pid: number, file: string) => void;
}

/** Lock files held by this process: its own pid in a lock file does not tell two holders apart. */
const heldHere = new Set<string>();

/**
 * Takes the lock of the data dir at `dir` (created if missing) for this process: one run at
 * a time on a data dir. The lock file is created exclusively (`O_CREAT | O_EXCL`, flag
 * `wx`) and holds this process's pid until `release()`; a lock file whose process is gone
 * (killed) is taken over, after `onStale`. Within one process a second take of the same
 * lock file is refused too, until the first is released.
 * @throws DataDirError with `inUse`'s message when a live process (or this one) holds it;
 *   the file system's errors
 */
export function acquireDataDirLock(dir: string, options: DataDirLockOptions): DataDirLock {
  mkdirsSync(dir);
  const file = resolve(join(dir, options.file));
  if (heldHere.has(file)) throw new DataDirError(options.inUse(process.pid, file));
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(file, `${process.pid}\n`, { flag: 'wx' });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 2) throw err;
    }
    const holder = lockFileHolder(file);
    if (holder !== undefined) throw new DataDirError(options.inUse(holder, file));
    const stale = lockFilePid(file);
    if (stale !== undefined && stale !== process.pid) options.onStale?.(stale, file);
    rmSync(file, { force: true }); // stale: its process is gone
  }
  heldHere.add(file);
  let held = true;
  return {
    file,
    release() {
      if (!held) return;
      held = false;
      heldHere.delete(file);
      if (lockFilePid(file) === process.pid) rmSync(file, { force: true });
    },
  };
}

/** The pid a lock file names; undefined when there is none or it does not hold one. */
function lockFilePid(file: string): number | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined; // no lock file (or the data dir was removed)
  }
  const pid = Number.parseInt(text, 10);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}
