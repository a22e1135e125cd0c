#!/usr/bin/env -S MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=268435456 node
// Entry point of `npx shardflow`: runs the TypeScript CLI through tsx's loader.
// The shebang raises glibc malloc's mmap and trim thresholds (32 MiB, 256 MiB; glibc
// manual, "Malloc Tunable Parameters"): write batches, iterator chunks and message payloads
// of 100 KiB to a few MiB were each mmapped, faulted in and unmapped again, a third of the
// rank benchmark's system CPU (docs/ARCHITECTURE.md, "Allocator"). glibc reads them at
// process start only (mallopt from the addon measured no effect), hence here; `node
// bin/shardflow.mjs` runs without them.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
process.exitCode = await main(process.argv);
// The command has ended and reported; a handle left open (a socket of a client that
// disconnects lazily) must not keep the process alive. Unref'd: a clean exit comes first.
setTimeout(() => process.exit(), 5000).unref();
