import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** The graphs bundled with the project (copied from shared/datasets). */
export const graphs = {
  hollins: join(root, 'examples/data/hollins'),
  polblogs: join(root, 'test/data/polblogs'),
  epa: join(root, 'test/data/epa'),
} as const;

/** Repository root. */
export const repoRoot = root;

/** A fresh temp folder, removed by the returned `cleanup`. */
export function tempDir(prefix = 'shardflow-test-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A logger that keeps warnings in memory for assertions. */
export function memoryLogger(): { log: pino.Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const log = pino({ level: 'info', base: undefined }, { write: (s: string) => void lines.push(JSON.parse(s)) });
  return { log, lines };
}
