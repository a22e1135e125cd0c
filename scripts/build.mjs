#!/usr/bin/env node
// Builds the package's JavaScript and declarations into dist/ (run by `prepare`, so `npm ci`
// builds it, and by `prepack`, so `npm pack`/`npm publish` ship it): tsc -p tsconfig.build.json
// (the public entries src/index.ts, src/storage/index.ts, src/runtime/brokers/index.ts,
// src/testing/index.ts and what they import), then the console's page files, which the
// compiled inspection server reads beside itself. dist/ is emptied first, so no stale module
// is shipped.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, readdirSync, rmSync } from 'node:fs';
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
