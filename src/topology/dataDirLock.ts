import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DataDirError } from '../index.js';

/** Name of a data dir's lock file: the pid of the process that runs a job on it. */
export const LOCK_FILE = 'shardflow.lock';

/**
 * The pid in `path`'s lock file when that process is alive (and is not this one), else
 * undefined (no lock file, or a stale one: its process was killed). Liveness is
 * `kill(pid, 0)` (POSIX: EPERM means alive, under another user).
 */
export function dataDirLockHolder(path: string): number | undefined {
  let pid: number;
  try {
    pid = Number.parseInt(readFileSync(join(path, LOCK_FILE), 'utf8'), 10);
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return undefined;
  try {
    process.kill(pid, 0);
    return pid;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM' ? pid : undefined;
  }
}

/** A held data dir lock. */
export interface DataDirLock {
  /** Removes the lock file if it still names this process. Idempotent. */
  release(): void;
}

/**
 * Takes the lock of the data dir at `path` (created if missing) for this process: one job
 * at a time on a data dir. Without it, two runs could both pass the data dir's checks
 * before either opened its stores; the second then rewrote the record and removed the
 * first one's broker scope. A lock left by a killed process is taken over.
 * @throws DataDirError when a live process holds it (its pid and the lock file's path)
 */
export function acquireDataDirLock(path: string): DataDirLock {
  mkdirSync(path, { recursive: true });
  const file = join(path, LOCK_FILE);
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(file, `${process.pid}\n`, { flag: 'wx' });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 2) throw err;
    }
    const holder = dataDirLockHolder(path);
    if (holder !== undefined) {
      throw new DataDirError(
        `data dir ${path} is in use by process ${holder} (another shardflow job on it): wait for it to end, or give another --data-dir. If no such process runs shardflow, remove ${file}.`,
      );
    }
    rmSync(file, { force: true }); // stale: its process is gone
  }
  let held = true;
  return {
    release() {
      if (!held) return;
      held = false;
      try {
        if (Number.parseInt(readFileSync(file, 'utf8'), 10) === process.pid) rmSync(file, { force: true });
      } catch {
        // already gone (the data dir was removed)
      }
    },
  };
}
