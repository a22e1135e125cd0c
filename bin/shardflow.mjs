#!/usr/bin/env -S MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=268435456 node
// Entry point of `npx shardflow`.
//
// Runs the compiled CLI (dist/cli/main.js, built by `npm run build`, which `npm ci` and
// `npm pack` run) while it is current: no file under src/ newer than the build's start
// (dist/.sources-as-of). Otherwise, and under the `shardflow-source` export condition (where
// `import 'shardflow'` means src/index.ts, so a topology module and the CLI share one copy of
// the framework), or with SHARDFLOW_FROM_SOURCE=1, it runs the TypeScript sources through
// tsx's loader. The compiled CLI
// starts in about half the CPU time: tsx's resolve and load hooks, not its transforms (which
// it caches), are most of a start's cost, and worker processes start often. A `.ts` topology
// module still loads under the compiled CLI: the loader registers tsx for it then
// (src/cluster/topologyModule.ts).
//
// The shebang raises glibc malloc's mmap and trim thresholds (32 MiB, 256 MiB; glibc
// manual, "Malloc Tunable Parameters"): write batches, iterator chunks and message payloads
// of 100 KiB to a few MiB were each mmapped, faulted in and unmapped again, a third of the
// rank benchmark's system CPU (docs/ARCHITECTURE.md, "Allocator"). glibc reads them at
// process start only (mallopt from the addon measured no effect), hence here; `node
// bin/shardflow.mjs` runs without them.
import { readdirSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

/** The newest mtime (ms) of the files under `dir`. */
function newestMtime(dir) {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = `${dir}/${e.name}`;
    newest = Math.max(newest, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return newest;
}

/** True when dist/ holds a CLI built after the last change under src/. */
function compiledIsCurrent() {
  try {
    return statSync(`${root}dist/cli/main.js`).isFile() && newestMtime(`${root}src`) <= statSync(`${root}dist/.sources-as-of`).mtimeMs;
  } catch {
    return false;
  }
}

const sourceCondition = import.meta.resolve('shardflow').endsWith('.ts');
let main;
if (!sourceCondition && process.env.SHARDFLOW_FROM_SOURCE !== '1' && compiledIsCurrent()) {
  ({ main } = await import('../dist/cli/main.js'));
} else {
  const { register } = await import('tsx/esm/api');
  register();
  // Read by src/cluster/topologyModule.ts: tsx is registered, a `.ts` module loads as it is.
  globalThis[Symbol.for('shardflow.tsxRegistered')] = true;
  ({ main } = await import('../src/cli/main.ts'));
}
process.exitCode = await main(process.argv);
// The command has ended and reported; a handle left open (a socket of a client that
// disconnects lazily) must not keep the process alive. Unref'd: a clean exit comes first.
setTimeout(() => process.exit(), 5000).unref();
