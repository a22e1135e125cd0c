import type { TestContext } from 'node:test';
import { Redis } from 'ioredis';
import { twoStageClicks } from './twoStageClicks.js';

/** The Redis the cluster tests use (coordination and broker). */
export const REDIS_URL = process.env.SHARDFLOW_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** Why Redis cannot be used, or undefined when it answers PING. */
export async function redisUnavailable(): Promise<string | undefined> {
  const r = new Redis(REDIS_URL, { lazyConnect: true, connectTimeout: 2000, maxRetriesPerRequest: 0 });
  r.on('error', () => {});
  try {
    await r.connect();
    await r.ping();
    return undefined;
  } catch (err) {
    return `${(err as Error).message} (start it with scripts/redis/start.sh)`;
  } finally {
    r.disconnect();
  }
}

/** Skips the test when Redis is down, or fails it with SHARDFLOW_REQUIRE_BROKERS=1. @returns true when skipped */
export async function skipWithoutRedis(t: TestContext): Promise<boolean> {
  const reason = await redisUnavailable();
  if (!reason) return false;
  if (process.env.SHARDFLOW_REQUIRE_BROKERS === '1') throw new Error(`redis is required (SHARDFLOW_REQUIRE_BROKERS=1) but unavailable: ${reason}`);
  t.skip(`redis unavailable: ${reason}`);
  return true;
}

/** Deletes every key under `prefix` (this test run's only). */
export async function deleteKeys(...prefixes: string[]): Promise<void> {
  const r = new Redis(REDIS_URL);
  try {
    for (const prefix of prefixes) {
      let cursor = '0';
      do {
        const [next, keys] = await r.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
        cursor = next;
        if (keys.length > 0) await r.del(...keys);
      } while (cursor !== '0');
    }
  } finally {
    r.disconnect();
  }
}

export type { Click, Delta } from './twoStageClicks.js';

/** The cluster tests' topology: the two-stage click counter, `count` on 6 partitions. */
export function clusterClickTopology() {
  return twoStageClicks('cluster-clicks', 6, { maxCount: 32, maxDelayMs: 5 });
}
