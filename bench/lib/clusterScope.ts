// Helpers of the cluster benchmarks (bench/cluster.ts, bench/cluster-counter.ts): a fresh
// cluster scope on the Redis at SHARDFLOW_REDIS_URL, polling, and the probe that decides
// whether the Redis is there at all.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { clusterBrokerIdentity, connectBroker, deleteBrokerScope, retireCluster, type BrokerIdentity } from '../../src/index.js';

/** The Redis of the cluster benchmarks: coordination and broker (SHARDFLOW_REDIS_URL, default 127.0.0.1:6379). */
export const REDIS = process.env.SHARDFLOW_REDIS_URL ?? 'redis://127.0.0.1:6379';
const POLL_MS = 100;

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Polls `probe` every 100 ms until it gives a value other than undefined.
 * @throws Error naming `what` after `timeoutMs` (default 5 minutes)
 */
export async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 300_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(POLL_MS);
  }
}

/** A fresh cluster of a benchmark run: its name, its broker scope and its data dir. */
export interface BenchScope {
  /** `bench-<tag>-<8 hex digits>`. */
  readonly clusterName: string;
  /** `clusterBrokerIdentity(REDIS, clusterName)`: Redis keys under `sf:cluster:<name>:`. */
  readonly identity: BrokerIdentity;
  /** A new directory under the OS temp dir (the workers' shared parent data dir). */
  readonly dataDir: string;
  /** Removes the broker scope, the cluster's Redis keys (once no worker is live) and the data dir. */
  dispose(): Promise<void>;
}

/** A fresh cluster scope named after `tag` (see BenchScope). */
export function benchScope(tag: string): BenchScope {
  const clusterName = `bench-${tag}-${randomUUID().slice(0, 8)}`;
  const identity = clusterBrokerIdentity(REDIS, clusterName);
  const dataDir = mkdtempSync(join(tmpdir(), 'sf-bench-cluster-'));
  return {
    clusterName, identity, dataDir,
    async dispose() {
      await deleteBrokerScope(identity);
      await retireCluster({ cluster: REDIS, clusterName }).catch(() => {});
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Whether the benchmarks' Redis answers: undefined when it does, else the reason (the
 * connection error's message), which a benchmark reports as `{ skipped: reason }`.
 * @throws the connection error under SHARDFLOW_REQUIRE_BROKERS=1 (CI: nothing may be skipped)
 */
export async function redisUnreachable(): Promise<string | undefined> {
  try {
    const probe = await connectBroker(clusterBrokerIdentity(REDIS, 'bench-probe'));
    await probe.close();
    return undefined;
  } catch (err) {
    if (process.env.SHARDFLOW_REQUIRE_BROKERS === '1') throw err;
    return (err as Error).message;
  }
}
