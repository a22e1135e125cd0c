import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchOptions, type BenchOptions } from './options.js';

const bench = join(dirname(fileURLToPath(import.meta.url)), '..');

/** The options shared by the benchmarks that rank a graph file (bench/rank.ts, bench/incremental.ts). */
export interface RankBenchOptions {
  readonly options: BenchOptions;
  /** `--graph DIR`: cnr-2000 from bench/data, polblogs (examples/data) under `--smoke`. */
  readonly dir: string;
  /** `--partitions N`: 16, or 4 under `--smoke`. */
  readonly partitions: number;
  /** `--tolerance T`: 1e-6 (the stopping bound then guarantees L1 <= 1e-6 to the exact scores). */
  readonly tolerance: number;
  /** `--threshold-factor F`: the coordinator's (its own default when not given). */
  readonly thresholdFactor: number | undefined;
  /** Path of `base` (pages.txt, links.tsv, pagerank.tsv) in `dir`, or of its `.xz` form when the plain one is absent. */
  file(base: string): string;
  /** The first fields of the benchmark's result line: `smoke`, `graph` (the folder's name), `partitions`, `tolerance`, `thresholdFactor` (null when not given). */
  readonly fields: { readonly smoke: boolean; readonly graph: string | undefined; readonly partitions: number; readonly tolerance: number; readonly thresholdFactor: number | null };
}

/**
 * Parses a graph benchmark's arguments (see RankBenchOptions).
 * @throws RangeError as `benchOptions` does for a missing or bad value
 */
export function rankBenchOptions(args: readonly string[]): RankBenchOptions {
  const options = benchOptions(args);
  const dir = resolve(options.string('--graph', join(bench, 'data/cnr-2000'), join(bench, '../examples/data/polblogs')));
  const partitions = options.number('--partitions', 16, 4);
  const tolerance = options.number('--tolerance', 1e-6);
  const thresholdFactor = options.has('--threshold-factor') ? options.number('--threshold-factor', 1) : undefined;
  return {
    options,
    dir,
    partitions,
    tolerance,
    thresholdFactor,
    file: (base) => (existsSync(join(dir, base)) ? join(dir, base) : join(dir, `${base}.xz`)),
    fields: { smoke: options.smoke, graph: dir.split('/').pop(), partitions, tolerance, thresholdFactor: thresholdFactor ?? null },
  };
}
