#!/usr/bin/env node
// `npm run example -- <name> [args]`: runs examples/<name>/main.ts under tsx, with the
// `shardflow-source` export condition so that `import ... from 'shardflow'` resolves to this
// checkout's src/ (package.json `exports`) without a build. Exits with the example's code.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const examples = readdirSync(join(root, 'examples'), { withFileTypes: true })
  .filter((d) => d.isDirectory() && existsSync(join(root, 'examples', d.name, 'main.ts')))
  .map((d) => d.name);
const [name, ...args] = process.argv.slice(2);
if (!name || !examples.includes(name)) {
  process.stderr.write(`usage: npm run example -- <name> [args]\nexamples: ${examples.join(', ')}\n`);
  process.exit(2);
}
const r = spawnSync(process.execPath, ['--conditions=shardflow-source', '--import', 'tsx', join(root, 'examples', name, 'main.ts'), ...args], { stdio: 'inherit', cwd: root });
process.exit(r.status ?? 1);
