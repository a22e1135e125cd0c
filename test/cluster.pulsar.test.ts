import assert from 'node:assert/strict';
import { test } from 'node:test';
import { withClusterRun, type WorkerProcess } from './kit/clusterRun.js';
import { skipWithoutRedis } from './kit/cluster.js';
import { skipWithoutPulsar } from './kit/brokers.js';

/**
 * The three-worker cluster over the real Pulsar broker (coordination still through Redis):
 * three `shardflow worker --broker pulsar://…` processes share the two-stage click counter's
 * 8 units (the stages' default receiver queue of 1024 runs: the Pulsar broker lowers it to the
 * WebSocket proxy's 1000); a SIGKILL of one mid-stream hands its partitions to the others
 * (Pulsar's failover subscriptions move its consumers), and the counts of both stages equal
 * the ground truth. Skipped without Pulsar or Redis, failed under SHARDFLOW_REQUIRE_BROKERS=1.
 */
const LEASE_MS = 3000;

test('three shardflow workers over Pulsar: SIGKILL of one mid-stream, exact counts', { timeout: 180_000 }, async (t) => {
  if (await skipWithoutRedis(t)) return;
  const pulsar = await skipWithoutPulsar(t);
  if (!pulsar) return;
  await withClusterRun(t, LEASE_MS, { cli: true, broker: pulsar }, async (run) => {
    const workers = [await run.startWorker('w1'), await run.startWorker('w2'), await run.startWorker('w3')];
    const s = await run.balancedOn(workers);
    assert.ok(s.workers.every((w) => w.broker?.kind === 'pulsar' && w.broker.scope === `shardflow-cluster-${run.clusterName}`), 'the workers report the cluster\'s Pulsar tenant');
    await run.send(600);
    const victim = workers.find((w) => w.id !== s.leader?.worker)!;
    const lost = s.partitions.filter((p) => p.owner === victim.id);
    const killedAt = Date.now();
    victim.child.kill('SIGKILL');
    await run.send(600); // sent while its partitions have no owner
    const live = workers.filter((w): w is WorkerProcess => w !== victim);
    const owned = await run.allRunningOn(live, 60_000);
    t.diagnostic(`failover over Pulsar: ${lost.length} partitions running again ${Date.now() - killedAt} ms after SIGKILL (lease ${LEASE_MS} ms)`);
    for (const p of lost) assert.ok(owned.partitions.find((q) => q.unit === p.unit)!.epoch > p.epoch, `${p.unit}: a newer epoch`);
    await run.send(300);
    await run.quiet(live);
    await run.stopAll();
    await run.verify();
  });
});
