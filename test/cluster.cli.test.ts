import assert from 'node:assert/strict';
import { test } from 'node:test';
import { get } from 'node:http';
import type { ClusterStatus } from '../src/index.js';
import { startClusterConsole } from '../src/cli/clusterConsole.js';
import { withClusterRun } from './kit/clusterRun.js';
import { REDIS_URL, skipWithoutRedis } from './kit/cluster.js';
import { runCli } from './kit/cliRun.js';

/**
 * The commands of cluster mode end to end, as a user runs them: three `shardflow worker`
 * processes load the two-stage click counter from a topology module
 * (test/kit/clusterTopology.ts, default export) and share its 8 partition units over Redis
 * Streams; `shardflow cluster status` (text and --json) and `shardflow tree --cluster` read
 * them from other processes; SIGTERM makes a worker hand its partitions back and exit 0; the
 * counts of both stages, read from every store at the end, equal the ground truth.
 */
const LEASE_MS = 3000;

test('shardflow worker x3, cluster status, tree --cluster, SIGTERM hand-back: exact counts', { timeout: 120_000 }, async (t) => {
  if (await skipWithoutRedis(t)) return;
  await withClusterRun(t, LEASE_MS, { cli: true }, async (run) => {
    const workers = [await run.startWorker('w1'), await run.startWorker('w2'), await run.startWorker('w3')];
    await run.balancedOn(workers);
    await run.send(1000);
    await run.quiet(workers);

    const read = ['--cluster', REDIS_URL, '--name', run.clusterName, '--key-prefix', run.keyPrefix];
    const json = await runCli(['cluster', 'status', ...read, '--json']);
    assert.equal(json.code, 0, json.stderr);
    const s = JSON.parse(json.stdout) as ClusterStatus;
    assert.deepEqual(s.workers.map((w) => w.name).sort(), ['w1', 'w2', 'w3']);
    assert.ok(s.workers.every((w) => w.inspectUrl?.startsWith('http://127.0.0.1:') && w.broker?.scope === run.brokerPrefix), 'each worker publishes its console and broker');
    assert.equal(s.partitions.length, 8);
    assert.ok(s.partitions.every((p) => p.state === 'running' && p.epoch >= 1 && p.backlog === 0), 'backlogs read through the broker the workers report');
    // Each worker's /metrics holds its ownership (found by a new user: no cluster state there).
    for (const w of s.workers) {
      const metrics = await (await fetch(`${w.inspectUrl}/metrics`)).text();
      assert.match(metrics, new RegExp(`^shardflow_cluster_partitions\\{state="running"\\} ${w.running.length}$`, 'm'), `${w.name}: running`);
      assert.match(metrics, /^shardflow_cluster_partitions\{state="failed"\} 0$/m);
      for (const p of s.partitions.filter((q) => q.owner === w.id)) {
        assert.match(metrics, new RegExp(`^shardflow_cluster_lease_epoch\\{unit="${p.unit}"\\} ${p.epoch}$`, 'm'), `${w.name}: ${p.unit} epoch`);
        assert.match(metrics, new RegExp(`^shardflow_cluster_lease_remaining_seconds\\{unit="${p.unit}"\\} [0-9.]+$`, 'm'));
      }
    }

    const text = await runCli(['cluster', 'status', ...read]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, new RegExp(`cluster ${run.clusterName}: 3 workers; leader \\S+ \\(epoch \\d+\\); assignment round \\d+; 8 partitions: 8 running; backlog 0`));
    for (const p of s.partitions) assert.match(text.stdout, new RegExp(`${p.unit}\\s+${p.owner!.replace('.', '\\.')}\\s+\\S+\\s+${p.epoch}\\s+\\d+\\s+running\\s+0`));

    const tree = await runCli(['tree', ...read, '--no-color']);
    assert.equal(tree.code, 0, tree.stderr);
    // A cluster nobody joined: exit 1 in both commands (found by a new user: tree exited 0).
    for (const args of [['cluster', 'status'], ['tree']]) {
      const none = await runCli([...args, '--cluster', REDIS_URL, '--name', 'nosuch', '--key-prefix', run.keyPrefix]);
      assert.equal(none.code, 1, `${args.join(' ')}: ${none.stdout} ${none.stderr}`);
      assert.match(none.stderr, /no cluster nosuch in .* \(no worker ever joined it\)/);
    }
    for (const w of s.workers) {
      const section = tree.stdout.slice(tree.stdout.indexOf(`worker ${w.id}`)).split('\n\n')[0]!;
      assert.match(section, /actors: .*restarts/, `${w.name}: its supervision tree`);
      for (const p of s.partitions.filter((q) => q.owner === w.id)) {
        assert.match(section, new RegExp(`  ${p.unit} epoch ${p.epoch} running lag 0`), `${w.name} lists ${p.unit}`);
        assert.match(section, new RegExp(`p${p.partition} \\[`), `${w.name}: the actors of ${p.unit}`);
      }
    }

    // One console for the whole cluster (`shardflow cluster console`): status and every worker's tree.
    const console_ = await startClusterConsole({ cluster: REDIS_URL, name: run.clusterName, keyPrefix: run.keyPrefix });
    try {
      const whole = (await (await fetch(`${console_.url}/cluster`)).json()) as { status: ClusterStatus; trees: Record<string, { tree?: { children?: unknown[] } }> };
      assert.deepEqual(whole.status.workers.map((w) => w.id).sort(), s.workers.map((w) => w.id).sort());
      assert.ok(s.workers.every((w) => whole.trees[w.id]?.tree !== undefined), 'every worker\'s tree, read from its own console');
      const page = await (await fetch(`${console_.url}/cluster.txt`)).text();
      for (const p of s.partitions) assert.match(page, new RegExp(`${p.unit} epoch ${p.epoch} running lag 0`));
      // fetch() cannot set Host: node:http can.
      const rebound = await new Promise<number>((resolve, reject) => get(`${console_.url}/cluster`, { headers: { host: 'attacker.example' } }, (r) => { r.resume(); resolve(r.statusCode!); }).on('error', reject));
      assert.equal(rebound, 403, 'a foreign Host header is refused (DNS rebinding)');
      // HEAD as the job's endpoint answers it (found by a new user: 405); other methods 405 with Allow.
      const head = await fetch(`${console_.url}/`, { method: 'HEAD' });
      assert.equal(head.status, 200);
      const post = await fetch(`${console_.url}/`, { method: 'POST' });
      assert.deepEqual([post.status, post.headers.get('allow')], [405, 'GET, HEAD']);
    } finally {
      await console_.close();
    }

    const [leaving, ...staying] = workers as [typeof workers[number], ...typeof workers];
    leaving.child.kill('SIGTERM');
    assert.equal((await leaving.exited).code, 0, 'exits 0 after the hand-back');
    assert.ok(leaving.events.some((e) => e.event.type === 'released'), 'it released its partitions');
    await run.send(500);
    await run.quiet(staying);
    await run.stopAll();
    await run.verify();
  });
});

test('shardflow worker refuses a module export that is not a topology and bad checkpoint options, and cluster status an unknown cluster', { timeout: 60_000 }, async (t) => {
  if (await skipWithoutRedis(t)) return;
  const bad = await runCli(['worker', '--topology', 'test/kit/clusterTopology.ts', '--export', 'notATopology', '--cluster', REDIS_URL, '--broker', REDIS_URL, '--data-dir', '/nonexistent']);
  assert.equal(bad.code, 2, bad.stderr);
  assert.match(bad.stderr, /export "notATopology" of test\/kit\/clusterTopology.ts is not a Topology .*candidates: default, factory/);
  const missing = await runCli(['worker', '--topology', 'test/kit/clusterTopology.ts', '--export', 'nope', '--cluster', REDIS_URL, '--broker', REDIS_URL, '--data-dir', '/nonexistent']);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /has no export "nope"/);
  const base = ['worker', '--topology', 'test/kit/clusterTopology.ts', '--cluster', REDIS_URL, '--broker', REDIS_URL, '--data-dir', '/nonexistent'];
  const http = await runCli([...base, '--checkpoints', 'http://127.0.0.1:9000/x']);
  assert.equal(http.code, 2, 'commander refuses the option argument (as --cluster\'s): bad input');
  assert.match(http.stderr, /expected file:\/\/\/DIR or s3:\/\/BUCKET\/PREFIX, got "http:/);
  const interval = await runCli([...base, '--checkpoint-interval-ms', '1000']);
  assert.equal(interval.code, 2);
  assert.match(interval.stderr, /--checkpoint-interval-ms needs --checkpoints/);
  const standbys = await runCli([...base, '--standbys', '1']);
  assert.equal(standbys.code, 2);
  assert.match(standbys.stderr, /--standbys needs --checkpoints/);
  const negative = await runCli([...base, '--standbys', '-1']);
  assert.equal(negative.code, 2);
  assert.match(negative.stderr, /expected an integer >= 0, got -1/);
  const web = await runCli(['worker', '--web-index', '--cluster', REDIS_URL, '--broker', REDIS_URL, '--data-dir', '/nonexistent', '--checkpoint-interval-ms', '1000']);
  assert.equal(web.code, 2);
  assert.match(web.stderr, /--checkpoint-interval-ms needs --checkpoints/);
  const unknown = await runCli(['cluster', 'status', '--cluster', REDIS_URL, '--name', `none-${process.pid}`]);
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /no cluster none-\d+ in redis:\/\/.* \(no worker ever joined it\)/);
});
