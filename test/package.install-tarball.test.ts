import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The package as a consumer gets it (issue 14, "Done when"): `npm pack` the project, install
 * the tarball into a scratch project in the OS temp dir (outside the repo) from the npm
 * registry, with the install-script approvals README.md documents and npm 11's
 * `--strict-allow-scripts` (so an approval that does not cover the tarball fails the test);
 * the tarball's install script builds the native addon against the system librocksdb. Then
 * a plain `node` ESM file imports `shardflow`, runs an 8-partition topology with an int64
 * merge-operator store over the memory broker and prints counts that must equal a count
 * without shardflow; and a consumer TypeScript file using every subpath type-checks under
 * `--strict --exactOptionalPropertyTypes --noUncheckedIndexedAccess` with `skipLibCheck: false`
 * (every published declaration, shardflow's and its dependencies', is checked).
 */
const root = fileURLToPath(new URL('..', import.meta.url));
const npm = (args: string[], cwd: string) => execFileSync('npm', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 300_000 });

const consumerMain = `
import { Topology, defineNamespace, msgpackCodec, int64Add, encodeInt64, decodeInt64, MemoryBroker } from 'shardflow';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';

const isVisit = (v) => typeof v === 'object' && v !== null && typeof v.page === 'string';
const visits = defineNamespace('visits', { codec: msgpackCodec('Visit', isVisit), partitions: 8, key: (v) => v.page });
const topology = Topology.create('tarball').stage('count', {
  input: visits,
  columnFamilies: { pages: { mergeOperator: int64Add() } },
  onMessage: (ctx, v) => ctx.writes.merge('pages', v.page, encodeInt64(1)),
  async query(reads) {
    const out = {};
    for await (const [k, v] of reads.iterate('pages')) out[k.toString()] = Number(decodeInt64(v));
    return out;
  },
});
const dataDir = mkdtempSync(join(tmpdir(), 'sf-tarball-data-'));
const broker = new MemoryBroker();
const running = await topology.start({ broker, dataDir });
const producer = await running.producer(visits, 'visits-src');
const expected = {};
for (let i = 0; i < 3000; i++) {
  const page = 'page-' + ((i * i) % 101);
  await producer.send({ page });
  expected[page] = (expected[page] ?? 0) + 1;
}
await running.quiescence({ timeoutMs: 120000 });
const parts = await running.askAll('count', null);
await running.stop();
await broker.close();
rmSync(dataDir, { recursive: true, force: true });
const counted = Object.assign({}, ...parts);
const used = parts.filter((p) => Object.keys(p).length > 0).length;
const equal = Object.keys(expected).length === Object.keys(counted).length && Object.entries(expected).every(([k, n]) => counted[k] === n);
console.log(JSON.stringify({ partitions: parts.length, used, pages: Object.keys(counted).length, total: Object.values(counted).reduce((a, b) => a + b, 0), equal }));
`;

const consumerTypes = `
import { Topology, defineNamespace, msgpackCodec, int64Add, record, encodeInt64, decodeInt64, encodeRecord, MemoryBroker, ChaosPolicy, type RunningTopology } from 'shardflow';
import { Store } from 'shardflow/storage';
import { RedisStreamsBroker, type Broker } from 'shardflow/brokers';
import { ManualClock, createProbe } from 'shardflow/testing';

interface Visit { readonly page: string; readonly ms?: number }
const isVisit = (v: unknown): v is Visit => typeof (v as Visit | null)?.page === 'string';
const visits = defineNamespace('visits', { codec: msgpackCodec('Visit', isVisit), partitions: 8, key: (v: Visit) => v.page });
const topology = Topology.create('types').stage('count', {
  input: visits,
  columnFamilies: { pages: { mergeOperator: int64Add() }, stats: { mergeOperator: record({ n: 'sum', last: 'max' }) } },
  onMessage(ctx, v) {
    ctx.writes.merge('pages', v.page, encodeInt64(1));
    ctx.writes.merge('stats', v.page, encodeRecord({ n: 1, last: v.ms ?? 0 }));
  },
  query: async (reads, page: string): Promise<bigint> => {
    const v = await reads.get('pages', page);
    return v === undefined ? 0n : decodeInt64(v);
  },
});
export async function run(broker: Broker, dataDir: string): Promise<bigint> {
  const running: RunningTopology<{ count: { request: string; answer: bigint } }> = await topology.start({ broker, dataDir, chaos: ChaosPolicy.parse('0.01') });
  const n = await running.ask('count', 0, 'page-1');
  await running.stop();
  return n;
}
export const parts = [Store, RedisStreamsBroker, MemoryBroker, new ManualClock(0), createProbe<string>()] as const;
`;

/** The files (relative to `pkg`) the `entries` reach through relative static and dynamic imports. */
function publicGraph(pkg: string, entries: string[]): string[] {
  const seen = new Set<string>();
  const queue = [...entries];
  while (queue.length > 0) {
    const f = queue.pop()!;
    if (seen.has(f)) continue;
    seen.add(f);
    const text = readFileSync(join(pkg, f), 'utf8');
    for (const m of text.matchAll(/(?:from\s+|import\s*\(\s*|import\s+)['"](\.{1,2}\/[^'"]+)['"]/g)) {
      queue.push(posix.normalize(posix.join(posix.dirname(f), m[1]!)));
    }
  }
  return [...seen];
}

test('npm pack, install the tarball outside the repo, run and type-check a consumer', { timeout: 600_000 }, () => {
  const scratch = mkdtempSync(join(tmpdir(), 'sf-tarball-'));
  try {
    npm(['pack', '--pack-destination', scratch], root);
    const tarball = join(scratch, readdirSync(scratch).find((f) => f.endsWith('.tgz'))!);
    const files = execFileSync('tar', ['tzf', tarball], { encoding: 'utf8' }).split('\n').filter(Boolean);
    for (const f of files) assert.doesNotMatch(f, /^package\/(test|bench|examples|node_modules|native\/build)\//, `shipped: ${f}`);
    // dist/ holds the compiled CLI too (bin/shardflow.mjs runs it), web index included; the
    // public entries' import graph is checked below, on the installed package.
    assert.ok(files.includes('package/dist/cli/main.js') && files.includes('package/dist/.sources-as-of'), 'the compiled CLI and its build stamp ship');
    for (const f of ['dist/index.js', 'dist/index.d.ts', 'dist/testing/index.js', 'dist/runtime/inspection/page.html', 'native/binding.gyp', 'native/scripts/install.mjs']) {
      assert.ok(files.includes(`package/${f}`), `tarball lacks ${f}`);
    }

    const project = join(scratch, 'consumer');
    execFileSync('mkdir', [project]);
    // The approvals README.md documents; a tarball is approved by its resolved identity.
    writeFileSync(join(project, 'package.json'), JSON.stringify({
      name: 'consumer', version: '1.0.0', type: 'module', private: true,
      allowScripts: { [`file:${tarball}`]: true, 'msgpackr-extract': true, esbuild: true },
    }));
    const install = npm(['install', '--no-audit', '--no-fund', '--strict-allow-scripts', tarball, '@types/node@20.19'], project);
    assert.doesNotMatch(install, /EBADENGINE/);

    // The framework's build graph holds no web-index module (they are not part of the API):
    // the modules the public entries reach through relative imports, in the installed dist/.
    const installed = join(project, 'node_modules', 'shardflow');
    const reached = publicGraph(installed, ['dist/index.js', 'dist/storage/index.js', 'dist/runtime/brokers/index.js', 'dist/testing/index.js']);
    assert.ok(reached.length > 50, `the public entries reach ${reached.length} modules`);
    for (const f of reached) assert.doesNotMatch(f, /^dist\/(actors|topology|jobs|cli|query|replay)\//, `a public entry imports ${f}`);
    // The command a consumer runs: the compiled CLI (the installed files share one mtime).
    const version = spawnSync(join(project, 'node_modules', '.bin', 'shardflow'), ['--version'], { cwd: project, encoding: 'utf8', timeout: 60_000 });
    assert.equal(version.status, 0, version.stderr);
    assert.equal(version.stdout.trim(), '0.1.0');

    writeFileSync(join(project, 'main.mjs'), consumerMain);
    const run = spawnSync(process.execPath, ['main.mjs'], { cwd: project, encoding: 'utf8', timeout: 180_000 });
    assert.equal(run.status, 0, run.stderr);
    const result = JSON.parse(run.stdout.trim().split('\n').at(-1)!);
    assert.deepEqual(result, { partitions: 8, used: 8, pages: 51, total: 3000, equal: true });

    writeFileSync(join(project, 'consumer.ts'), consumerTypes);
    writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({
      compilerOptions: {
        target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', types: ['node'], noEmit: true,
        strict: true, exactOptionalPropertyTypes: true, noUncheckedIndexedAccess: true, skipLibCheck: false,
      },
      files: ['consumer.ts'],
    }));
    const tsc = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: project, encoding: 'utf8', timeout: 120_000 });
    assert.equal(tsc.status, 0, `tsc reported errors:\n${tsc.stdout}${tsc.stderr}`);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
});
