#!/usr/bin/env node
// Builds the package's JavaScript and declarations into dist/ (run by `prepare`, so `npm ci`
// builds it, and by `prepack`, so `npm pack`/`npm publish` ship it): tsc -p tsconfig.build.json
// (the public entries src/index.ts, src/storage/index.ts, src/runtime/brokers/index.ts,
// src/testing/index.ts, the CLI src/cli/main.ts and what they import), then the console's
// page files, which the compiled inspection server reads beside itself. dist/ is emptied
// first, so no stale module is shipped. Last, dist/.sources-as-of, whose mtime is the build's
// start: bin/shardflow.mjs runs the compiled CLI only while no file under src/ is newer.
// With --if-stale, builds only when a file under src/ is newer than that stamp (or none).
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
let tsc;
try {
  tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc');
} catch {
  process.stderr.write('shardflow build: typescript is not installed (a devDependency): run `npm ci` with dev dependencies to build dist/\n');
  process.exit(1);
}
/** The newest mtime (ms) of the files under `dir`. */
function newestMtime(dir) {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    newest = Math.max(newest, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return newest;
}
const stamp = join(root, 'dist', '.sources-as-of');
// --if-stale (npm test): nothing to do while the last build is newer than every source.
if (process.argv.includes('--if-stale') && existsSync(stamp) && existsSync(join(root, 'dist', 'cli', 'main.js')) &&
  newestMtime(join(root, 'src')) <= statSync(stamp).mtimeMs) {
  process.exit(0);
}
const startedAt = new Date();
rmSync(join(root, 'dist'), { recursive: true, force: true });
const r = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit', cwd: root });
if (r.status !== 0) process.exit(r.status ?? 1);
const pages = join('runtime', 'inspection');
for (const file of readdirSync(join(root, 'src', pages)).filter((f) => /^page\.(html|css|js)$/.test(f))) {
  copyFileSync(join(root, 'src', pages, file), join(root, 'dist', pages, file));
}
if (!existsSync(join(root, 'dist', 'index.js')) || !existsSync(join(root, 'dist', 'index.d.ts'))) {
  process.stderr.write('shardflow build: dist/index.js or dist/index.d.ts missing after tsc\n');
  process.exit(1);
}
// Written last: a build that failed above leaves no stamp, so the CLI runs from src/.
writeFileSync(stamp, 'The mtime of this file is when the build that wrote dist/ started (scripts/build.mjs).\n');
utimesSync(stamp, startedAt, startedAt);
