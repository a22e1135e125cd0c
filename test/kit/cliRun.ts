import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { repoRoot } from './datasets.js';

/** What a CLI run did. */
export interface CliRun {
  /** Exit code, or null when killed by a signal. */
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  /** True when `kill` fired before the process ended. */
  readonly killed: boolean;
}

/** When to signal a CLI run: the first stderr line for which `when` is true (after `delayMs`). */
export interface KillPoint {
  readonly signal: NodeJS.Signals;
  readonly when: (line: string) => boolean;
  readonly delayMs?: number;
}

/**
 * Runs `shardflow <args>` (bin/shardflow.mjs, as a user does) and, with `kill`, sends it a
 * signal at the first stderr line that matches; `onLine` sees every stderr line (and the pid). Resolves
 * when the process has exited.
 * @param timeoutMs SIGKILL after this long (the run then counts as hung: code null)
 */
export function runCli(args: readonly string[], options: { readonly kill?: KillPoint; readonly onLine?: (line: string, pid: number) => void; readonly timeoutMs?: number; readonly env?: Record<string, string> } = {}): Promise<CliRun> {
  const child = spawn(process.execPath, [resolve(repoRoot, 'bin/shardflow.mjs'), ...args], { env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let pending = '';
  let killed = false;
  const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 180_000);
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => {
    const text = d.toString('utf8');
    stderr += text;
    pending += text;
    const lines = pending.split('\n');
    pending = lines.pop()!;
    for (const line of lines) {
      options.onLine?.(line, child.pid!);
      if (killed || !options.kill?.when(line)) continue;
      killed = true;
      const k = options.kill;
      setTimeout(() => child.kill(k.signal), k.delayMs ?? 0);
    }
  });
  return new Promise((resolveRun) => {
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      // Let the pipes drain.
      setImmediate(() => resolveRun({ code, signal, stdout, stderr, killed }));
    });
  });
}

/** Reads `url<TAB>score` lines into a map. */
export function readScoresFile(file: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line) continue;
    const [url, score] = line.split('\t');
    out.set(url!, Number(score));
  }
  return out;
}

export { seededRandom } from '../../src/runtime/supervision/seededRandom.js';
