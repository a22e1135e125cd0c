import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { tempDir } from './kit/datasets.js';

/**
 * examples/pipeline as CI runs it (`npm run example -- pipeline`): with `--chaos 0.05` over the
 * memory broker, held open (`--hold`) while this test reads the console it serves (the tree
 * JSON and Prometheus `/metrics`: both stages' partition actors, both namespaces' counts), then
 * again on the same data dir over Redis. Each run checks its per-customer and per-region
 * totals against a computation without shardflow and exits 1 on a mismatch or a dead letter.
 */
const root = fileURLToPath(new URL('..', import.meta.url));
const redis = process.env.SHARDFLOW_REDIS_URL ?? 'redis://127.0.0.1:6379';

interface TreeNode { readonly path: string; readonly kind: string; readonly status: string; readonly children: readonly TreeNode[] }
const paths = (n: TreeNode): TreeNode[] => [n, ...n.children.flatMap(paths)];

/** Runs the example held open; `whileHeld` gets the console URL while the topology still runs. */
async function heldExample(args: string[], whileHeld: (url: string) => Promise<void>): Promise<string> {
  const child = spawn('npm', ['run', '-s', 'example', '--', 'pipeline', '--hold', ...args], { cwd: root, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const exited = once(child, 'exit');
  const held = new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (d) => {
      stdout += d;
      const url = /^console: (http:\/\/127\.0\.0\.1:\d+)\//m.exec(stdout)?.[1];
      if (url && stdout.includes('holding:')) resolve(url);
    });
    void exited.then(() => reject(new Error(`the example exited before holding:\n${stdout}\n${stderr}`)));
  });
  try {
    await whileHeld(await held);
  } finally {
    child.stdin.end();
  }
  const [code] = await exited;
  assert.equal(code, 0, `${stdout}\n${stderr}`);
  return stdout;
}

test('pipeline under chaos: console shows both stages while running; memory broker, then Redis on the same data dir', { timeout: 600_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-example-pipeline-');
  try {
    const first = await heldExample(['--chaos', '0.05', '--data-dir', dir], async (url) => {
      const tree = (await (await fetch(`${url}/tree`)).json()) as TreeNode;
      const actors = new Map(paths(tree).map((n) => [n.path, n]));
      for (let p = 0; p < 8; p++) assert.equal(actors.get(`/customers/p${p}`)?.kind, 'customers', `/customers/p${p} in the tree`);
      for (let p = 0; p < 2; p++) assert.equal(actors.get(`/regions/p${p}`)?.kind, 'regions', `/regions/p${p} in the tree`);
      assert.equal(actors.has('/customers/p8') || actors.has('/regions/p2'), false);
      const metrics = await (await fetch(`${url}/metrics`)).text();
      assert.match(metrics, /shardflow_broker_messages_settled_total\{namespace="orders"\} 5000\n/);
      assert.match(metrics, /shardflow_broker_lag_messages\{namespace="region-sales"\} 0\n/);
      assert.match(metrics, /shardflow_actor_messages_processed_total\{path="\/regions\/p1",kind="regions"[^}]*\} [1-9]/);
    });
    assert.match(first, /producer order-source epoch 1: sent 5000 orders over memory, chaos 0.05/);
    assert.match(first, /customers: \d+; regions: 6, 5000 orders \(all runs\) from \d+ partial aggregates; partition restarts: \d+; dead letters: 0/);
    assert.match(first, /check: equal to the ground truth computed without shardflow/);

    const r = spawnSync('npm', ['run', '-s', 'example', '--', 'pipeline', '--chaos', '0.05', '--data-dir', dir, '--broker', redis], { cwd: root, encoding: 'utf8', timeout: 300_000 });
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /producer order-source epoch 2: sent 5000 orders over redis:\/\//);
    assert.match(r.stdout, /regions: 6, 10000 orders \(all runs\)/);
    assert.match(r.stdout, /check: equal to the ground truth computed without shardflow/);
  } finally {
    cleanup();
  }
});
