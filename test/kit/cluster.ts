import type { TestContext } from 'node:test';
import { Redis } from 'ioredis';
import { decodeInt64, defineNamespace, encodeInt64, int64Add, msgpackCodec, Topology } from '../../src/index.js';

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

export interface Click { readonly host: string; readonly n: number }
export interface Delta { readonly host: string; readonly delta: number }
const isClick = (v: unknown): v is Click => typeof (v as Click)?.host === 'string' && Number.isInteger((v as Click).n);
const isDelta = (v: unknown): v is Delta => typeof (v as Delta)?.host === 'string' && Number.isInteger((v as Delta).delta);

/**
 * The cluster tests' topology, a two-stage click counter: `count` (6 partitions by host)
 * merges +1 per click and emits one delta per host and batch through its outbox to `totals`
 * (2 partitions), which merges them. Both stages answer `'hosts'` with [host, count] pairs.
 */
export function clusterClickTopology() {
  const clicks = defineNamespace('clicks', { codec: msgpackCodec('Click', isClick), partitions: 6, key: (c: Click) => c.host });
  const deltas = defineNamespace('host-deltas', { codec: msgpackCodec('Delta', isDelta), partitions: 2, key: (d: Delta) => d.host });
  const hostsQuery = async (reads: { iterate(cf: 'hosts'): AsyncGenerator<[Buffer, Buffer]> }) => {
    const out: Array<[string, number]> = [];
    for await (const [k, v] of reads.iterate('hosts')) out.push([k.toString(), Number(decodeInt64(v))]);
    return out;
  };
  const topology = Topology.create('cluster-clicks')
    .stage('count', {
      input: clicks,
      outputs: { deltas },
      columnFamilies: { hosts: { mergeOperator: int64Add() } },
      batching: { maxCount: 32, maxDelayMs: 5 },
      onMessage: (ctx, click) => ctx.writes.merge('hosts', click.host, encodeInt64(1)),
      onBatch(ctx, batch) {
        const sums = new Map<string, number>();
        for (const c of batch) sums.set(c.host, (sums.get(c.host) ?? 0) + 1);
        for (const [host, delta] of sums) ctx.emit('deltas', { host, delta });
      },
      query: (reads, _q: 'hosts') => hostsQuery(reads),
    })
    .stage('totals', {
      input: deltas,
      columnFamilies: { hosts: { mergeOperator: int64Add() } },
      onMessage: (ctx, d) => ctx.writes.merge('hosts', d.host, encodeInt64(d.delta)),
      query: (reads, _q: 'hosts') => hostsQuery(reads),
    });
  return { clicks, deltas, topology };
}
