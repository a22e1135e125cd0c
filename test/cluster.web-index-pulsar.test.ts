// The web index on a cluster over the real Pulsar broker (coordination through Redis): three
// `shardflow worker --web-index --broker pulsar://…` processes, a client in this process ranks
// polblogs and epa (one cluster each) with the one-process result; on epa one worker is
// SIGKILLed during the metric rounds. Skipped without Pulsar or Redis, failed under
// SHARDFLOW_REQUIRE_BROKERS=1.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { skipWithoutRedis } from './kit/cluster.js';
import { skipWithoutPulsar } from './kit/brokers.js';
import { graphs } from './kit/datasets.js';
import { assertClusterRank, rankCase, withWebIndexCluster } from './kit/webIndexCluster.js';

const PARTITIONS = 6;
const LEASE_MS = 3000;

for (const [name, dir, kill] of [['polblogs', graphs.polblogs, false], ['epa', graphs.epa, true]] as const) {
  test(`three workers rank ${name} over Pulsar${kill ? ', one SIGKILLed during the rounds' : ''}: the one-process result`, { timeout: 240_000 }, async (t) => {
    if (await skipWithoutRedis(t)) return;
    const pulsar = await skipWithoutPulsar(t);
    if (!pulsar) return;
    await withWebIndexCluster(t, { partitions: PARTITIONS, leaseMs: LEASE_MS, broker: pulsar }, async (c) => {
      const ws = [await c.startWorker('w1'), await c.startWorker('w2'), await c.startWorker('w3')];
      const s = await c.allRunningOn(ws);
      assert.ok(s.workers.every((w) => w.broker?.kind === 'pulsar'), 'the workers run on Pulsar');
      const expected = await rankCase(dir, PARTITIONS);
      let killed = false;
      const result = await c.rank(expected, {
        onRound: (r) => {
          if (kill && r.round === 3 && !killed) {
            killed = true;
            ws[0]!.child.kill('SIGKILL');
          }
        },
      });
      assert.equal(killed, kill);
      assertClusterRank(result, expected);
    });
  });
}
