import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { seededRandom } from '../../src/index.js';
import { repoRoot } from './datasets.js';

/** What one run of test/kit/clickTopologyChild.ts did. */
export interface ClickRun {
  /** Exit code, or null when killed by a signal. */
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  /** The JSON line a completed run prints: how the start found the data dir, clicks per host in each stage. */
  readonly result?: { recovery: { previous: string; backlog?: number; lost?: string }; count: Record<string, number>; totals: Record<string, number>; dead?: string[] };
}

/**
 * Spawns the click counter child (see its header for `args`); `onStarted` is called with
 * the child once it printed `started` (`--hold`). Resolves when it exited.
 * @param timeoutMs SIGKILL after this long (the run then has signal SIGKILL and no result)
 */
export function runClickChild(args: readonly string[], options: { readonly onStarted?: (child: ChildProcess) => void; readonly timeoutMs?: number } = {}): Promise<ClickRun> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(repoRoot, 'test/kit/clickTopologyChild.ts'), ...args], { cwd: repoRoot, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 50_000);
  child.stdout.on('data', (d: Buffer) => {
    stdout += d.toString('utf8');
    if (options.onStarted && /^started$/m.test(stdout)) {
      const started = options.onStarted;
      options = { ...options, onStarted: undefined };
      started(child);
    }
  });
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  return new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      setImmediate(() => {
        const line = stdout.split('\n').find((l) => l.startsWith('{'));
        resolve({ code, signal, stdout, stderr, ...(line ? { result: JSON.parse(line) } : {}) });
      });
    });
  });
}

/** A seeded kill point: before the K-th message `count` applies (of 1,500 sent), or the K-th `totals` applies. */
export function killPoint(seed: number): { readonly stage: 'count' | 'totals'; readonly at: number; readonly args: string[] } {
  const random = seededRandom(seed);
  random(); // the first draw of small seeds is small: skip it
  const stage = random() < 0.6 ? 'count' : 'totals';
  const at = stage === 'count' ? 100 + Math.floor(random() * 1200) : 2 + Math.floor(random() * 30);
  return { stage, at, args: ['--kill-stage', stage, '--kill-at', String(at)] };
}

/** How many clicks a killed run's producer had sent (its `--sent-file`; 0 when none resolved). */
export function sentBefore(file: string): number {
  try {
    return Number(readFileSync(file, 'utf8'));
  } catch {
    return 0;
  }
}
