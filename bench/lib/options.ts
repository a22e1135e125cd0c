/**
 * The command-line options of a benchmark (bench/<name>.ts `run(args)`): `--name value`
 * pairs and the `--smoke` flag.
 *
 * Smoke mode (`--smoke`) runs the same code paths on tiny inputs in seconds, so that CI
 * (test/bench.smoke.test.ts) runs every benchmark and a broken one fails there instead of
 * rotting. Each option has two defaults, full and smoke; a value given on the command line
 * wins in both modes. A smoke run's figures say nothing about speed.
 */
export interface BenchOptions {
  /** True when `--smoke` was given. */
  readonly smoke: boolean;
  /** True when `--name` was given (with or without a value). */
  has(name: string): boolean;
  /**
   * The positive number after `--name`, else `full` (or `smoke` in smoke mode).
   * @throws RangeError when the value is missing, not a number, or not above 0
   */
  number(name: string, full: number, smoke?: number): number;
  /**
   * The text after `--name`, else `full` (or `smoke` in smoke mode).
   * @throws RangeError when `--name` is the last argument or followed by another option
   */
  string(name: string, full: string, smoke?: string): string;
}

/**
 * Parses a benchmark's arguments (as bench/run.mjs hands them over, `--json` removed).
 * @param args e.g. `['--smoke', '--partitions', '4']`
 */
export function benchOptions(args: readonly string[]): BenchOptions {
  const smoke = args.includes('--smoke');
  const value = (name: string): string | undefined => {
    const i = args.indexOf(name);
    if (i < 0) return undefined;
    const v = args[i + 1];
    if (v === undefined || v.startsWith('--')) throw new RangeError(`${name} needs a value`);
    return v;
  };
  return {
    smoke,
    has: (name) => args.includes(name),
    number(name, full, smokeDefault = full) {
      const given = value(name);
      if (given === undefined) return smoke ? smokeDefault : full;
      const n = Number(given);
      if (!Number.isFinite(n) || n <= 0) throw new RangeError(`${name} needs a positive number, got ${JSON.stringify(given)}`);
      return n;
    },
    string(name, full, smokeDefault = full) {
      return value(name) ?? (smoke ? smokeDefault : full);
    },
  };
}
