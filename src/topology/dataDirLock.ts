import { join } from 'node:path';
import { acquireDataDirLock as acquireLock, lockFileHolder, type DataDirLock } from '../index.js';

/** Name of a data dir's lock file: the pid of the process that runs a job on it. */
export const LOCK_FILE = 'shardflow.lock';

/**
 * The pid in `path`'s lock file when that process is alive (and is not this one), else
 * undefined (no lock file, or a stale one: its process was killed). See `lockFileHolder`.
 */
export function dataDirLockHolder(path: string): number | undefined {
  return lockFileHolder(join(path, LOCK_FILE));
}

/** A held data dir lock. */
export type { DataDirLock };

/**
 * Takes the lock of the data dir at `path` (created if missing) for this process: one job
 * at a time on a data dir (the framework's `acquireDataDirLock` on `shardflow.lock`).
 * Without it, two runs could both pass the data dir's checks before either opened its
 * stores; the second then rewrote the record and removed the first one's broker scope. A
 * lock left by a killed process is taken over.
 * @throws DataDirError when a live process holds it (its pid and the lock file's path)
 */
export function acquireDataDirLock(path: string): DataDirLock {
  return acquireLock(path, {
    file: LOCK_FILE,
    inUse: (holder, file) =>
      `data dir ${path} is in use by process ${holder} (another shardflow job on it): wait for it to end, or give another --data-dir. If no such process runs shardflow, remove ${file}.`,
  });
}
