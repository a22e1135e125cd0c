import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Every TypeScript snippet of docs/guide.md runs. Convention: a ```ts block is preceded by the
 * line `<!-- run: NAME -->`; the blocks with one NAME are joined in document order into one
 * program, NAME.ts (so a later block may use what an earlier one declared, and imports only
 * the names it adds), written to a scratch dir whose `node_modules/shardflow` links to this
 * checkout. The programs type-check together (tsc, with the `shardflow-source` condition, so
 * `shardflow` is this checkout's src/), then each runs under tsx with that condition (as
 * scripts/example.mjs runs the examples) and must exit 0; the programs check their own
 * results with node:assert. `<!-- run: NAME; also: ARG ARG -->` runs the program again with
 * each ARG as its argument (broker URLs): when the server is not reachable that run is
 * skipped, or fails under SHARDFLOW_REQUIRE_BROKERS=1 (as the broker suites do). A ```ts block
 * without the marker fails the test: the guide has no unchecked TypeScript.
 */
const root = fileURLToPath(new URL('..', import.meta.url));
const guide = readFileSync(join(root, 'docs', 'guide.md'), 'utf8');

interface Program {
  readonly name: string;
  readonly parts: string[];
  readonly also: string[];
}

/** The guide's programs, in order of first appearance. @throws AssertionError for an unmarked ```ts block or a marker without a block */
function programs(markdown: string): Program[] {
  const lines = markdown.split('\n');
  const out = new Map<string, Program>();
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const marker = /^<!-- run: ([a-z0-9-]+)(?:; also: ([^>]*?))? -->$/.exec(line.trim());
    if (marker) {
      assert.match(lines[i + 1] ?? '', /^```ts\s*$/, `docs/guide.md:${i + 1}: a run marker must sit right above a \`\`\`ts block`);
      const end = lines.findIndex((l, j) => j > i + 1 && /^```\s*$/.test(l));
      assert.ok(end > 0, `docs/guide.md:${i + 2}: unterminated code block`);
      const name = marker[1]!;
      const program = out.get(name) ?? { name, parts: [], also: [] };
      program.parts.push(lines.slice(i + 2, end).join('\n'));
      if (marker[2]) program.also.push(...marker[2].split(/\s+/).filter(Boolean));
      out.set(name, program);
      i = end;
      continue;
    }
    if (/^```(ts|typescript)\b/.test(line)) assert.fail(`docs/guide.md:${i + 1}: a \`\`\`ts block without a <!-- run: NAME --> marker`);
  }
  return [...out.values()];
}

/** Whether host:port of `url` accepts a TCP connection within 2 s. */
function reachable(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port) });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(2000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

test('docs/guide.md: every ts snippet type-checks and runs', { timeout: 900_000 }, async (t) => {
  const all = programs(guide);
  assert.ok(all.length > 0, 'the guide has runnable snippets');
  const scratch = mkdtempSync(join(tmpdir(), 'sf-guide-'));
  try {
    mkdirSync(join(scratch, 'node_modules'));
    symlinkSync(root, join(scratch, 'node_modules', 'shardflow'), 'dir');
    writeFileSync(join(scratch, 'package.json'), JSON.stringify({ name: 'guide-snippets', private: true, type: 'module' }));
    for (const p of all) writeFileSync(join(scratch, `${p.name}.ts`), `${p.parts.join('\n\n')}\n`);
    writeFileSync(join(scratch, 'tsconfig.json'), JSON.stringify({
      compilerOptions: {
        target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', lib: ['ES2023'], customConditions: ['shardflow-source'],
        types: ['node'], typeRoots: [join(root, 'node_modules', '@types')], strict: true, skipLibCheck: true, noEmit: true,
      },
      files: all.map((p) => `${p.name}.ts`),
    }));

    await t.test('type-check', () => {
      const tsc = spawnSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], { cwd: scratch, encoding: 'utf8', timeout: 300_000 });
      assert.equal(tsc.status, 0, `tsc reported errors in the guide's snippets (scratch file NAME.ts = program NAME):\n${tsc.stdout}${tsc.stderr}`);
    });

    const tsx = import.meta.resolve('tsx');
    for (const p of all) {
      for (const arg of [undefined, ...p.also]) {
        await t.test(arg ? `${p.name} ${arg}` : p.name, async (st) => {
          if (arg && /^[a-z]+:\/\//.test(arg) && !(await reachable(arg))) {
            if (process.env.SHARDFLOW_REQUIRE_BROKERS === '1') assert.fail(`${arg} is required (SHARDFLOW_REQUIRE_BROKERS=1) but not reachable`);
            st.skip(`${arg} not reachable`);
            return;
          }
          const r = spawnSync(process.execPath, ['--conditions=shardflow-source', '--import', tsx, `${p.name}.ts`, ...(arg ? [arg] : [])], {
            cwd: scratch, encoding: 'utf8', timeout: 300_000,
          });
          assert.equal(r.status, 0, `program ${p.name}${arg ? ` ${arg}` : ''} exited ${r.status} (${r.signal ?? 'no signal'}):\n${r.stdout.slice(-4000)}\n${r.stderr.slice(-4000)}`);
        });
      }
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
});
