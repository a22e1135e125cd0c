#!/usr/bin/env -S MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=268435456 node
// (The shebang sets the allocator thresholds of bin/shardflow.mjs, for both sides of each comparison.)
// `npm run -s bench -- <name> [--json] [args]`: runs bench/<name>.ts, whose `run(args)` returns
// one result object (or an array of them), and prints each as one JSON line.
import { register } from 'tsx/esm/api';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

register();
const here = dirname(fileURLToPath(import.meta.url));
const [name, ...rest] = process.argv.slice(2);
if (!name || !existsSync(join(here, `${name}.ts`))) {
  console.error(`usage: npm run -s bench -- <name> [--json] [args]; names: rank, storage, runtime, broker, query`);
  process.exit(2);
}
const args = rest.filter((a) => a !== '--json');
let commit = 'unknown';
try {
  commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: here, encoding: 'utf8' }).trim();
} catch {
  // not a git checkout
}
const mod = await import(join(here, `${name}.ts`));
const result = await mod.run(args);
for (const r of Array.isArray(result) ? result : [result]) {
  console.log(JSON.stringify({ name, commit, mallocTuned: process.env.MALLOC_MMAP_THRESHOLD_ !== undefined, ...r }));
}
