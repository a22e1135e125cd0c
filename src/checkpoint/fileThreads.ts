/**
 * Blocking file work of the checkpoint store (durable writes, folder syncs, listings, reads of
 * write-ahead log tails), run on a few worker threads of its own instead of as chains of
 * promise-based `fs` calls.
 *
 * Why: a WAL tail put on the web index is about 25 `fs` calls (stat, read, open, write,
 * fsync, close, rename, folder fsync, for a log chunk and a manifest). As promises, each call
 * is a trip through the libuv pool and back to a main thread busy with the worker's other
 * partitions' pushes, and each fsync holds one of the pool's 4 threads, which the RocksDB
 * addon's reads and writes wait for too. On cnr-2000 (16 partitions, 2 workers) that made a
 * put of 0.7 MB of log take 50 to 120 ms, on every partition's path to the end of each metric
 * round, where the same calls made synchronously take 3 to 6 ms. Here one message carries a
 * whole step (a durable write, a log tail read and its SHA-256) to a thread that makes the
 * calls synchronously, and one message brings the answer back.
 *
 * The threads are started on first use and hold the process open only while an operation is
 * in flight (`unref` otherwise). Errors come back as `Error`s with the original `code`
 * (`ENOENT`, `EEXIST`, ...).
 */
import { Worker } from 'node:worker_threads';

/**
 * Threads of the pool. A fsync blocks its thread, and concurrent fsyncs share the filesystem's
 * journal commits: 8 puts of a 0.7 MB log chunk and a manifest (one worker's partitions in a
 * metric round) took 92 to 110 ms on one thread, 65 on two, 52 on four and 44 to 50 on eight
 * (medians of 10, ext4 on the 2-core machine here, a CI run beside).
 */
const THREADS = 4;

/** One object to write durably: its final path and the temporary one it is written as first. */
export interface DurableWrite {
  readonly file: string;
  readonly tmp: string;
  readonly bytes: Uint8Array;
}

/** One file of a directory listing: its path (relative to the listed folder, `/`-separated), size and mtime. */
export interface ListedFile {
  readonly relative: string;
  readonly bytes: number;
  readonly mtimeMs: number;
}

/**
 * A write-ahead log read by {@link FileThreads.readLogTail}: its bytes from `from` to its end
 * (`bytes` of them) and their SHA-256 (hex; '' when none); `data` holds them unless the log
 * is `linked` (then `data` is empty: the log is hard-linked as the `link` path given, and
 * synced to disk up to its end).
 */
export interface LogTailRead {
  readonly name: string;
  readonly from: number;
  readonly bytes: number;
  readonly data: Buffer;
  readonly sha256: string;
  readonly linked: boolean;
  /** `data` deflated (RFC 1951 raw, level 1), when asked for (`deflateFrom`) and read (not linked). */
  readonly deflated?: Buffer;
}

/** Where {@link FileThreads.readLogTail} hard-links the logs it reads: `dir/<prefix><log name>`. */
export interface LogLink {
  readonly dir: string;
  readonly prefix: string;
}

/**
 * What {@link FileThreads.readLogTail} found: the reads, or why the tail cannot be read
 * (`gone`: the first log is no longer the oldest one left, or shrank, or was deleted during
 * the read; `limit`: the logs grew by more than the budget).
 */
export type LogTailResult = { readonly status: 'ok'; readonly reads: LogTailRead[]; readonly added: number } | { readonly status: 'gone' | 'limit' };

/**
 * The code each thread runs (a CommonJS script: `eval` workers have `require`). Only Node's
 * built-in modules, so that it runs the same under tsx and from dist/.
 */
function threadMain(): void {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { parentPort } = require('node:worker_threads') as typeof import('node:worker_threads');
  const fs = require('node:fs') as typeof import('node:fs');
  const path = require('node:path') as typeof import('node:path');
  const crypto = require('node:crypto') as typeof import('node:crypto');
  const zlib = require('node:zlib') as typeof import('node:zlib');
  const syncDir = (dir: string) => {
    let fd: number | undefined;
    try {
      fd = fs.openSync(dir, 'r');
      fs.fsyncSync(fd);
    } catch {
      // some filesystems refuse fsync on a directory (EISDIR/EINVAL): the rename is all we have
    } finally {
      if (fd !== undefined) fs.closeSync(fd);
    }
  };
  /** Writes (or copies) to `tmp` beside `file` (parent folders created) and fsyncs it; removes `tmp` on failure. */
  const stage = (file: string, tmp: string, write: (fd: number) => void) => {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    try {
      const fd = fs.openSync(tmp, 'wx');
      try {
        write(fd);
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
    } catch (err) {
      fs.rmSync(tmp, { force: true });
      throw err;
    }
  };
  /** `stage`, then renames `tmp` over `file` (removing `tmp` if the rename fails). */
  const commit = (file: string, tmp: string, write: (fd: number) => void) => {
    stage(file, tmp, write);
    try {
      fs.renameSync(tmp, file);
    } catch (err) {
      fs.rmSync(tmp, { force: true });
      throw err;
    }
  };
  const writeAll = (fd: number, bytes: Uint8Array) => {
    for (let done = 0; done < bytes.length; ) done += fs.writeSync(fd, bytes, done, bytes.length - done);
  };
  /** Reads `file` from its start to its end, handing each piece (up to 1 MiB, a reused buffer) to `each`. */
  const readAll = (file: string, each: (chunk: Buffer) => void) => {
    const fd = fs.openSync(file, 'r');
    try {
      const buf = Buffer.allocUnsafe(1 << 20);
      for (let pos = 0; ; ) {
        const n = fs.readSync(fd, buf, 0, buf.length, pos);
        if (n === 0) break;
        each(buf.subarray(0, n));
        pos += n;
      }
    } finally {
      fs.closeSync(fd);
    }
  };
  /** Each op returns its answer, and the buffers to transfer with it (not copy). */
  const ops: Record<string, (a: any) => { value: unknown; transfer?: ArrayBuffer[] }> = {
    write(a: { writes: Array<{ file: string; tmp: string; bytes: Uint8Array }>; syncDirs: boolean }) {
      // Every temporary file written and fsynced first (their syncs back to back), then renamed
      // in order, each run of renames into one folder followed by that folder's sync.
      const staged: Array<{ file: string; tmp: string }> = [];
      try {
        for (const w of a.writes) {
          stage(w.file, w.tmp, (fd) => writeAll(fd, w.bytes));
          staged.push(w);
        }
        for (const [i, w] of a.writes.entries()) {
          fs.renameSync(w.tmp, w.file);
          staged.shift();
          const dir = path.dirname(w.file);
          const next = a.writes[i + 1];
          if (a.syncDirs && (next === undefined || path.dirname(next.file) !== dir)) syncDir(dir);
        }
      } catch (err) {
        for (const w of staged) fs.rmSync(w.tmp, { force: true });
        throw err;
      }
      return { value: undefined };
    },
    copy(a: { from: string; file: string; tmp: string; link: boolean }) {
      if (a.link) {
        // A hard link where the folders share a filesystem (RocksDB's checkpoints do the same
        // with SST files): no bytes copied. The fsync makes the data durable if it was not.
        fs.mkdirSync(path.dirname(a.file), { recursive: true });
        try {
          fs.linkSync(a.from, a.tmp);
          const fd = fs.openSync(a.tmp, 'r');
          try {
            fs.fsyncSync(fd);
          } finally {
            fs.closeSync(fd);
          }
          fs.renameSync(a.tmp, a.file);
          return { value: 'linked' };
        } catch (err) {
          fs.rmSync(a.tmp, { force: true });
          const code = (err as NodeJS.ErrnoException).code;
          // another filesystem, or one without hard links: copied below
          if (code !== 'EXDEV' && code !== 'EPERM' && code !== 'EMLINK' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') throw err;
        }
      }
      commit(a.file, a.tmp, (fd) => readAll(a.from, (chunk) => writeAll(fd, chunk)));
      return { value: 'copied' };
    },
    hash(a: { file: string }) {
      const h = crypto.createHash('sha256');
      readAll(a.file, (chunk) => h.update(chunk));
      return { value: h.digest('hex') };
    },
    remove(a: { paths: string[] }) {
      for (const p of a.paths) fs.rmSync(p, { force: true });
      return { value: undefined };
    },
    syncDirs(a: { dirs: string[] }) {
      for (const dir of a.dirs) syncDir(dir);
      return { value: undefined };
    },
    list(a: { dir: string }) {
      let entries;
      try {
        entries = fs.readdirSync(a.dir, { withFileTypes: true, recursive: true });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { value: [] };
        throw err;
      }
      const out: Array<{ relative: string; bytes: number; mtimeMs: number }> = [];
      for (const e of entries) {
        if (!e.isFile()) continue;
        const full = path.join(e.parentPath, e.name);
        let st;
        try {
          st = fs.statSync(full);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue; // deleted meanwhile
          throw err;
        }
        out.push({ relative: path.relative(a.dir, full).split(path.sep).join('/'), bytes: st.size, mtimeMs: st.mtimeMs });
      }
      return { value: out };
    },
    readLogTail(a: { dir: string; pattern: string; first: string; from: number; budget: number; link?: { dir: string; prefix: string }; deflateFrom?: number }) {
      const pattern = new RegExp(a.pattern);
      const number = (name: string) => Number(pattern.exec(name)![1]);
      const firstNumber = number(a.first);
      // The live logs and those RocksDB archived (moved to `archive/` once obsolete, kept for
      // `WAL_ttl_seconds`: a flush does not end a chain whose log it made obsolete).
      const archive = path.join(a.dir, 'archive');
      const where = new Map<string, string>();
      for (const dir of [archive, a.dir]) {
        let names: string[];
        try {
          names = fs.readdirSync(dir);
        } catch (err) {
          if (dir === archive && (err as NodeJS.ErrnoException).code === 'ENOENT') continue;
          throw err;
        }
        for (const n of names) if (pattern.test(n) && number(n) >= firstNumber) where.set(n, dir);
      }
      const logs = [...where.keys()].sort((x, y) => number(x) - number(y));
      if (logs[0] !== a.first) return { value: { status: 'gone' } };
      const reads: Array<{ name: string; from: number; bytes: number; data: Buffer; sha256: string; linked: boolean; deflated?: Buffer }> = [];
      let added = 0;
      // Linking: errors that say this filesystem cannot (another filesystem, no hard links);
      // the logs are then read and copied as without a link.
      const refused = new Set(['EXDEV', 'EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'EMLINK', 'ENOSYS']);
      let link = a.link;
      let linkedAny = false;
      /** Links the log open as `fd` (found at `at`, or moved to the archive since) as `target`: true when `target` is that log. */
      const linkLog = (fd: number, at: string, name: string, target: string): boolean => {
        const own = fs.fstatSync(fd);
        try {
          const st = fs.statSync(target);
          return st.ino === own.ino && st.dev === own.dev;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        }
        fs.mkdirSync(path.dirname(target), { recursive: true });
        try {
          fs.linkSync(at, target);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
          fs.linkSync(path.join(archive, name), target); // archived since it was opened
        }
        linkedAny = true;
        const st = fs.statSync(target);
        return st.ino === own.ino && st.dev === own.dev;
      };
      for (const [i, name] of logs.entries()) {
        const from = i === 0 ? a.from : 0;
        let fd;
        let at = path.join(where.get(name)!, name);
        try {
          fd = fs.openSync(at, 'r');
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
          // archived since the listing (an open log stays readable when it is moved)
          try {
            at = path.join(archive, name);
            fd = fs.openSync(at, 'r');
          } catch (again) {
            if ((again as NodeJS.ErrnoException).code === 'ENOENT') return { value: { status: 'gone' } };
            throw again;
          }
        }
        try {
          const size = fs.fstatSync(fd).size;
          if (size < from) return { value: { status: 'gone' } };
          added += size - from;
          if (added > a.budget) return { value: { status: 'limit' } };
          let linked = false;
          if (link) {
            try {
              linked = linkLog(fd, at, name, path.join(link.dir, link.prefix + name));
            } catch (err) {
              if (!refused.has((err as NodeJS.ErrnoException).code ?? '')) throw err;
              link = undefined;
            }
          }
          if (linked) {
            // Hashed in pieces of a reused buffer (nothing handed over), then made durable up
            // to `size` (RocksDB does not sync its log on each write): a manifest may name it.
            const hash = crypto.createHash('sha256');
            const buf = Buffer.allocUnsafe(Math.min(1 << 20, Math.max(1, size - from)));
            for (let pos = from; pos < size; ) {
              const n = fs.readSync(fd, buf, 0, Math.min(buf.length, size - pos), pos);
              if (n === 0) throw new Error(`${name} ended at ${pos} bytes, expected ${size}`);
              hash.update(buf.subarray(0, n));
              pos += n;
            }
            fs.fdatasyncSync(fd);
            reads.push({ name, from, bytes: size - from, data: Buffer.alloc(0), sha256: size > from ? hash.digest('hex') : '', linked: true });
            continue;
          }
          const data = Buffer.allocUnsafeSlow(size - from);
          for (let done = 0; done < data.length; ) {
            const n = fs.readSync(fd, data, done, data.length - done, from + done);
            if (n === 0) throw new Error(`${name} ended at ${from + done} bytes, expected ${size}`);
            done += n;
          }
          // Deflated here too (level 1), on this thread: the libuv pool, where zlib's async
          // calls run, is busy with RocksDB's writes and reads during a metric round.
          const deflated = a.deflateFrom !== undefined && data.length >= a.deflateFrom ? zlib.deflateRawSync(data, { level: 1 }) : undefined;
          reads.push({ name, from, bytes: data.length, data, sha256: data.length > 0 ? crypto.createHash('sha256').update(data).digest('hex') : '', linked: false, ...(deflated ? { deflated } : {}) });
        } finally {
          fs.closeSync(fd);
        }
      }
      if (linkedAny) syncDir(a.link!.dir); // the new links' names
      return { value: { status: 'ok', reads, added }, transfer: reads.filter((r) => !r.linked).flatMap((r) => [r.data.buffer as ArrayBuffer, ...(r.deflated ? [r.deflated.buffer as ArrayBuffer] : [])]) };
    },
  };
  parentPort!.on('message', (m: { id: number; op: string; args: unknown }) => {
    try {
      const { value, transfer } = ops[m.op]!(m.args);
      parentPort!.postMessage({ id: m.id, value }, transfer ?? []);
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      parentPort!.postMessage({ id: m.id, error: { message: String(e?.message ?? e), code: e?.code, stack: e?.stack } });
    }
  });
}

interface Pending {
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: unknown) => void;
}

interface Thread {
  readonly worker: Worker;
  readonly pending: Map<number, Pending>;
}

/**
 * A small pool of file threads (see the module's comment). One per process is enough:
 * {@link fileThreads} gives it.
 */
export class FileThreads {
  #threads: Thread[] = [];
  #next = 0;

  constructor(readonly size = THREADS) {}

  #thread(): Thread {
    if (this.#threads.length < this.size) {
      // `__name`: the helper esbuild (tsx) adds to keep function names, absent in a thread's script.
      const worker = new Worker(`const __name = (f) => f;\n(${threadMain.toString()})()`, { eval: true, name: 'shardflow checkpoint files' });
      const t: Thread = { worker, pending: new Map() };
      worker.unref();
      worker.on('message', (m: { id: number; value?: unknown; error?: { message: string; code?: string; stack?: string } }) => {
        const p = t.pending.get(m.id);
        if (!p) return;
        t.pending.delete(m.id);
        if (t.pending.size === 0) worker.unref();
        if (m.error) {
          const err = Object.assign(new Error(m.error.message), m.error.code ? { code: m.error.code } : {});
          p.reject(err);
        } else p.resolve(m.value);
      });
      const fail = (err: unknown) => {
        this.#threads = this.#threads.filter((x) => x !== t);
        for (const p of t.pending.values()) p.reject(err);
        t.pending.clear();
      };
      worker.on('error', fail);
      worker.on('exit', (code) => fail(new Error(`a checkpoint file thread exited (code ${code})`)));
      this.#threads.push(t);
      return t;
    }
    // The least busy thread.
    let best = this.#threads[0]!;
    for (const t of this.#threads) if (t.pending.size < best.pending.size) best = t;
    return best;
  }

  #run<T>(op: string, args: unknown, transfer: ArrayBuffer[] = []): Promise<T> {
    const t = this.#thread();
    const id = this.#next++;
    return new Promise<T>((resolve, reject) => {
      t.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      if (t.pending.size === 1) t.worker.ref();
      t.worker.postMessage({ id, op, args }, transfer);
    });
  }

  /**
   * Writes each object through its temporary file (parent folders created): every temporary
   * file written and fsynced first, then renamed over its `file` in order; with `syncDirs`,
   * each run of consecutive objects in one folder is followed by that folder's fsync before
   * the next object is renamed, so an object is durable before any later one of another
   * folder is visible (a checkpoint's log chunks, then its manifest, in one message). The
   * bytes are copied to the thread (the caller's buffers stay usable).
   * @throws the first file error (its `code` kept); the objects renamed before it stay, the
   *   temporary files of the others are removed
   */
  write(writes: readonly DurableWrite[], options: { readonly syncDirs: boolean }): Promise<void> {
    return this.#run('write', { writes, syncDirs: options.syncDirs });
  }

  /**
   * Copies `from` to `file` through `tmp` (fsynced, renamed); the folder is not synced. With
   * `link` (a file never written again), hard-links it instead where both are on one
   * filesystem that has hard links (else copies).
   * @returns how: `linked` or `copied`
   * @throws the file error
   */
  copy(from: string, file: string, tmp: string, options: { readonly link?: boolean } = {}): Promise<'linked' | 'copied'> {
    return this.#run('copy', { from, file, tmp, link: options.link === true });
  }

  /** The SHA-256 (hex) of `file`'s content, read on a file thread. @throws the file error (`ENOENT`, ...) */
  hash(file: string): Promise<string> {
    return this.#run('hash', { file });
  }

  /** Removes each file (one already gone is not an error). @throws the first other file error (its `code` kept) */
  remove(paths: readonly string[]): Promise<void> {
    return paths.length === 0 ? Promise.resolve() : this.#run('remove', { paths });
  }

  /** fsyncs each folder (a no-op where the filesystem refuses). */
  syncDirs(dirs: readonly string[]): Promise<void> {
    return dirs.length === 0 ? Promise.resolve() : this.#run('syncDirs', { dirs });
  }

  /** Every file under `dir`, recursively, with size and mtime (ms); [] when `dir` does not exist. */
  list(dir: string): Promise<ListedFile[]> {
    return this.#run('list', { dir });
  }

  /**
   * Reads what a store's write-ahead logs hold past `first` at byte `from`: the logs in `dir`
   * and in `dir/archive` (where RocksDB moves obsolete logs when `WAL_ttl_seconds` is set) whose names match `pattern` (a RegExp source whose group 1 is the log's number) and whose
   * number is at least `first`'s, oldest first; of `first` the bytes from `from`, of the
   * newer ones all bytes, each with its SHA-256.
   * @param budget most bytes the reads may add up to (else `limit`)
   * @param link where to hard-link each log instead of handing its bytes over (`LogTailRead.linked`;
   *   an existing link is kept when it is the same file): the bytes are then hashed and the log
   *   synced up to its end. Where the filesystem refuses (EXDEV and the like), that log and the
   *   next are read as without a link.
   * @param deflateFrom deflate each read (not linked) of at least this many bytes too (`LogTailRead.deflated`)
   */
  readLogTail(dir: string, pattern: RegExp, first: string, from: number, budget: number, link?: LogLink, deflateFrom?: number): Promise<LogTailResult> {
    return this.#run<LogTailResult>('readLogTail', { dir, pattern: pattern.source, first, from, budget, ...(link ? { link } : {}), ...(deflateFrom !== undefined ? { deflateFrom } : {}) }).then((r) =>
      r.status === 'ok'
        ? { ...r, reads: r.reads.map((x) => ({ ...x, data: Buffer.from(x.data.buffer, x.data.byteOffset, x.data.byteLength), ...(x.deflated ? { deflated: Buffer.from(x.deflated.buffer, x.deflated.byteOffset, x.deflated.byteLength) } : {}) })) }
        : r,
    );
  }
}

let shared: FileThreads | undefined;

/** The process's file threads (started on first use). */
export function fileThreads(): FileThreads {
  shared ??= new FileThreads();
  return shared;
}
