import { test } from 'node:test';
import assert from 'node:assert/strict';
import { watchPartitions } from '../src/cli/rankCluster.js';
import { skipWithoutRedis } from './kit/cluster.js';
import { until } from './kit/clusterRun.js';
import { withWebIndexCluster } from './kit/webIndexCluster.js';

// Found by a new user: with its only worker SIGKILLed, `rank --cluster` printed nothing for
// minutes (its asks waited for an owner). A client job now says, every 30 s (here 300 ms),
// which partitions do not run and why, and nothing while they all run.
test('a client job says which partitions do not run while it waits on them, and nothing while they run', { timeout: 120_000 }, async (t) => {
  if (await skipWithoutRedis(t)) return;
  await withWebIndexCluster(t, { partitions: 2, leaseMs: 3000 }, async (c) => {
    const w = await c.startWorker('w1');
    await c.allRunningOn([w]);
    const said: string[] = [];
    const watch = watchPartitions(await c.client(), (line) => said.push(line), c.clusterName, 300);
    try {
      await new Promise((r) => setTimeout(r, 1200));
      assert.deepEqual(said, [], 'nothing while every partition runs');
      w.child.kill('SIGKILL');
      const line = (await until('a line about the partitions', async () => said.find((l) => /partitions run/.test(l)), 20_000))!;
      assert.match(line, new RegExp(`^waiting on cluster ${c.clusterName}: 0 of 2 partitions run, [01] workers live; index/0 (silent|unowned)`));
      await until('the unowned partitions said, the lease run out', async () => said.find((l) => /0 workers live; index\/0 unowned/.test(l)), 20_000);
    } finally {
      watch.stop();
    }
  });
});
