import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { PulsarBroker, RedisStreamsBroker, deleteBrokerScope } from '../src/index.js';
import { pulsarUnavailable } from './kit/brokers.js';
import { skipUnlessRequired, stageExactlyOnceScenario } from './kit/stageScenario.js';

// The framework's exactly-once stage checks (test/kit/stageScenario.ts: a two-stage topology
// under chaos, a producer started again under its next epoch, an undecodable message and a
// fenced-off one dead-lettered, a store of another shape refused) over the wire brokers,
// each run in a scope of its own that is removed after. Skipped when the broker is not
// reachable, failed instead under SHARDFLOW_REQUIRE_BROKERS=1.

test('a stage under chaos over Redis Streams: counts equal ground truth, a restarted producer is counted, bad input is dead-lettered', { timeout: 120_000 }, async (t) => {
  const url = process.env.SHARDFLOW_REDIS_URL ?? 'redis://127.0.0.1:6379';
  const prefix = `sftest-fw-${randomUUID().slice(0, 8)}:`;
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  let reason: string | undefined;
  try {
    await probe.connect();
    await probe.quit();
  } catch (err) {
    probe.disconnect();
    reason = `${url} not reachable: ${(err as Error).message} (start it with scripts/redis/start.sh)`;
  }
  if (skipUnlessRequired(t, 'redis', reason)) return;
  await stageExactlyOnceScenario(
    () => RedisStreamsBroker.connect({ url, prefix, heartbeatMs: 100, deadAfterMs: 1500, blockMs: 100 }),
    async () => void (await deleteBrokerScope({ kind: 'redis', url, scope: prefix })),
  );
});

test('a stage under chaos over Pulsar: counts equal ground truth, a restarted producer is counted, bad input is dead-lettered', { timeout: 120_000 }, async (t) => {
  const webUrl = process.env.SHARDFLOW_PULSAR_URL ?? 'http://127.0.0.1:8080';
  if (skipUnlessRequired(t, 'pulsar', await pulsarUnavailable(webUrl))) return;
  const tenant = `shardflow-test-fw-${randomUUID().slice(0, 8)}`;
  await stageExactlyOnceScenario(
    () => PulsarBroker.connect({ webUrl, tenant, connectTimeoutMs: 15_000 }),
    async () => void (await deleteBrokerScope({ kind: 'pulsar', url: webUrl.replace(/^http/, 'pulsar'), scope: tenant })),
  );
});
