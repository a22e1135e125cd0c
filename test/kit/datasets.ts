import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { l1Distance } from '../../src/jobs/rankGraph.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** The graphs bundled with the project (real graphs with reference PageRank values; sources in the README of each graph folder (examples/data, test/data/epa, bench/data)). */
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

/**
 * Asserts that a ranking converged and its scores are within L1 `tolerance` (default 1e-6)
 * of `reference`. @returns the L1 distance
 */
export function assertMatchesReference(result: { converge: { converged: boolean }; scores: Array<[string, number]> }, reference: ReadonlyMap<string, number>, tolerance = 1e-6): number {
  assert.ok(result.converge.converged, 'converged');
  const l1 = l1Distance(new Map(result.scores), reference);
  assert.ok(l1 <= tolerance, `L1 ${l1}`);
  return l1;
}
