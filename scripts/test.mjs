#!/usr/bin/env node
// `npm test` after the type-check: runs test/*.test.ts in two lanes side by side, each lane
// one `node --test --test-concurrency=1` over its files in turn.
//
// - services: every file that names a shared server (Redis, Pulsar, the S3 server, cluster
//   workers reaching them) or the package's dist/. They run one at a time, as they always
//   have: they share the servers, and they spawn several processes each.
// - local: the rest, which touch nothing outside their process, its children and their own
//   temporary directories (memory brokers, RocksDB in mkdtemp dirs, HTTP servers on port 0).
//
// Sequentially, the suite took 69 minutes on a slow 2-core machine; the lanes are about as
// long as each other (~35 and ~25 min there), so the run takes the longer one plus the
// slowdown of sharing the cores. The tests assert results, never timings (the one size
// comparison, test/crawl.huge-page-linear.test.ts, compares CPU time, not wall time).
//
// Each line of a lane's TAP output is printed as it comes, prefixed with its lane; the last
// lines sum up both. Exit status: 0 when both lanes passed.
//   node scripts/test.mjs                  both lanes
//   node scripts/test.mjs FILE...          those files, one lane
//   SHARDFLOW_TEST_LANES=1 node scripts/test.mjs   every file in one lane, in turn
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
/** What puts a file in the services lane: a shared server, cluster processes or the package build. */
const SERVICES = /redis|pulsar|\bs3\b|S3|REDIS_URL|brokerSpec|--checkpoints|--cluster|clusterRun|webIndexCluster|skipWithout|npm pack|bench/i;

const args = process.argv.slice(2);
const all = readdirSync(join(root, 'test')).filter((f) => f.endsWith('.test.ts')).sort().map((f) => join('test', f));
let lanes;
if (args.length > 0) lanes = [['tests', args]];
else if (process.env.SHARDFLOW_TEST_LANES === '1') lanes = [['tests', all]];
else {
  const services = all.filter((f) => SERVICES.test(readFileSync(join(root, f), 'utf8')));
  const local = all.filter((f) => !services.includes(f));
  lanes = [['services', services], ['local', local]];
}

const children = new Set();
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    for (const c of children) c.kill(signal);
    process.exit(130);
  });
}

/** Runs one lane; resolves to its exit status and its last summary lines (`# tests`, `# pass`, ...). */
function runLane([name, files]) {
  return new Promise((resolve) => {
    const started = Date.now();
    process.stdout.write(`[${name}] ${files.length} files\n`);
    const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=1', '--test-reporter=tap', ...files], {
      cwd: root, stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(child);
    const summary = [];
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream }).on('line', (line) => {
        process.stdout.write(`[${name}] ${line}\n`);
        if (/^# (tests|pass|fail|cancelled|skipped|todo) \d+/.test(line)) summary.push(line.slice(2));
      });
    }
    child.on('close', (code, signal) => {
      children.delete(child);
      resolve({ name, status: code ?? (signal ? 1 : 0), summary, seconds: Math.round((Date.now() - started) / 1000) });
    });
  });
}

const results = await Promise.all(lanes.map(runLane));
for (const r of results) {
  process.stdout.write(`== ${r.name}: ${r.status === 0 ? 'passed' : `FAILED (exit ${r.status})`} in ${r.seconds} s; ${r.summary.join(', ')}\n`);
}
process.exitCode = results.some((r) => r.status !== 0) ? 1 : 0;
