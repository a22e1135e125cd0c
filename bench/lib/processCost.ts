// What a benchmark reads of the machine's costs: CPU seconds of processes (/proc), of the
// Redis server (INFO cpu), and bytes of a directory on disk.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';

/** Clock ticks per second of /proc/<pid>/stat (`getconf CLK_TCK`: 100 on Linux x86-64 and arm64). */
const CLK_TCK = 100;

/**
 * User + system CPU seconds of process `pid` so far, all its threads (RocksDB's background
 * threads included): fields 14 and 15 of /proc/<pid>/stat (proc(5)).
 * @throws Error when the process is gone or /proc is not there (not Linux)
 */
export function processCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) is in parentheses and may hold spaces: count from after it.
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(rest[11]) + Number(rest[12])) / CLK_TCK;
}

/**
 * Peak resident set of process `pid` so far, in MiB (`VmHWM` of /proc/<pid>/status).
 * @throws Error when the process is gone or the field is absent
 */
export function peakRss(pid: number): number {
  const m = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`/proc/${pid}/status has no VmHWM`);
  return Math.round(Number(m[1]) / 1024);
}

/** User + system CPU seconds of this process so far (`process.cpuUsage`). */
export function ownCpuSeconds(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

/** The Redis server's CPU, read through one connection of its own. */
export interface RedisCpu {
  /** `used_cpu_user + used_cpu_sys` of INFO cpu, in seconds, since the server started (every client's work). */
  seconds(): Promise<number>;
  close(): Promise<void>;
}

/**
 * Connects to the Redis at `url` to read its CPU seconds.
 * @throws the connection error when it does not answer
 */
export async function redisCpu(url: string): Promise<RedisCpu> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  return {
    async seconds() {
      const info = await redis.info('cpu');
      const field = (name: string): number => {
        const m = new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info);
        if (!m) throw new Error(`INFO cpu of ${url} has no ${name}`);
        return Number(m[1]);
      };
      return field('used_cpu_user') + field('used_cpu_sys');
    },
    async close() {
      await redis.quit();
    },
  };
}

/** Bytes of the files under a directory, all of them and the RocksDB table files (`*.sst`) alone. */
export interface DirBytes {
  readonly all: number;
  readonly sst: number;
}

/** Sums the sizes of the regular files under `dir`, recursively (symbolic links not followed; a file deleted while listed counts 0). */
export function dirBytes(dir: string): DirBytes {
  let all = 0;
  let sst = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, e.name);
    if (e.isDirectory()) {
      const sub = dirBytes(path);
      all += sub.all;
      sst += sub.sst;
    } else if (e.isFile()) {
      // A store open meanwhile may delete a file its compaction replaced: not there any more, not counted.
      const size = statSync(path, { throwIfNoEntry: false })?.size ?? 0;
      all += size;
      if (e.name.endsWith('.sst')) sst += size;
    }
  }
  return { all, sst };
}
