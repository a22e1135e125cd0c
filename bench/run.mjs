#!/usr/bin/env -S MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=268435456 node
// (The shebang sets the allocator thresholds of bin/shardflow.mjs, for both sides of each comparison.)
// `npm run -s bench -- <name> [--json] [--smoke] [args]`: runs bench/<name>.ts (every .ts file
// directly in bench/ is a benchmark; helpers live in bench/lib/), whose `run(args)` returns one
// result object, and prints it as one JSON line on stdout: `name`, `commit`, `mallocTuned`, then
// the result's fields (`resultFields` of the module; `smoke` true under `--smoke`, tiny inputs:
// bench/lib/options.ts). Logs go to stderr. test/bench.smoke.test.ts runs every benchmark so.
import { register } from 'tsx/esm/api';
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

register();
const here = dirname(fileURLToPath(import.meta.url));
const names = readdirSync(here).filter((f) => f.endsWith('.ts')).map((f) => f.slice(0, -3)).sort();
const [name, ...rest] = process.argv.slice(2);
if (!name || !names.includes(name)) {
  console.error(`usage: npm run -s bench -- <name> [--json] [--smoke] [args]; names: ${names.join(', ')}`);
  process.exit(2);
}
const args = rest.filter((a) => a !== '--json');
let commit = 'unknown';
try {
  commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: here, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
} catch {
  // not a git checkout: the commit is unknown, nothing else depends on it
}
const mod = await import(join(here, `${name}.ts`));
const result = await mod.run(args);
if (result === null || typeof result !== 'object' || Array.isArray(result)) {
  throw new TypeError(`bench/${name}.ts run() must return one result object, got ${Array.isArray(result) ? 'an array' : typeof result}`);
}
console.log(JSON.stringify({ name, commit, mallocTuned: process.env.MALLOC_MMAP_THRESHOLD_ !== undefined, ...result }));
