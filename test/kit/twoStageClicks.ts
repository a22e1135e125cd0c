import { decodeInt64, defineNamespace, encodeInt64, int64Add, msgpackCodec, Topology } from '../../src/index.js';

/** A click on a host (`n`: the click's number, for ground truth). */
export interface Click { readonly host: string; readonly n: number }
/** Clicks of one host in one batch of `count`. */
export interface Delta { readonly host: string; readonly delta: number }
const isClick = (v: unknown): v is Click => typeof (v as Click)?.host === 'string' && Number.isInteger((v as Click).n);
const isDelta = (v: unknown): v is Delta => typeof (v as Delta)?.host === 'string' && Number.isInteger((v as Delta).delta);

/**
 * What the stages answer: `'hosts'` -> [host, count] pairs; `{ fail }` throws `new Error(fail)`;
 * `{ slowMs }` writes `slow query <stage>/<p> started` on stderr, waits that long and answers
 * `[['pid', <the answering process's pid>]]` (the cluster tests' remote asks: who answered).
 */
export type HostsQuery = 'hosts' | { readonly fail: string } | { readonly slowMs: number };

/**
 * The tests' two-stage click counter (the framework's stage checks and the cluster tests):
 * `count` (`partitions` by host) merges +1 per click into an int64 per host and, once per batch
 * (`onBatch`), emits one delta per host of the batch through its outbox to `totals` (2
 * partitions), which merges them. Both stages answer `HostsQuery`.
 */
export function twoStageClicks(name: string, partitions: number, batching: { readonly maxCount: number; readonly maxDelayMs: number }) {
  const clicks = defineNamespace('clicks', { codec: msgpackCodec('Click', isClick), partitions, key: (c: Click) => c.host });
  const deltas = defineNamespace('host-deltas', { codec: msgpackCodec('Delta', isDelta), partitions: 2, key: (d: Delta) => d.host });
  const hostsQuery = async (reads: { iterate(cf: 'hosts'): AsyncGenerator<[Buffer, Buffer]> }, q: HostsQuery, where: string): Promise<Array<[string, number]>> => {
    if (typeof q === 'object' && 'fail' in q) throw new Error(q.fail);
    if (typeof q === 'object') {
      process.stderr.write(`slow query ${where} started\n`);
      await new Promise((r) => setTimeout(r, q.slowMs));
      return [['pid', process.pid]];
    }
    const out: Array<[string, number]> = [];
    for await (const [k, v] of reads.iterate('hosts')) out.push([k.toString(), Number(decodeInt64(v))]);
    return out;
  };
  const topology = Topology.create(name)
    .stage('count', {
      input: clicks,
      outputs: { deltas },
      columnFamilies: { hosts: { mergeOperator: int64Add() } },
      batching,
      onMessage: (ctx, click) => ctx.writes.merge('hosts', click.host, encodeInt64(1)),
      onBatch(ctx, batch) {
        const sums = new Map<string, number>();
        for (const c of batch) sums.set(c.host, (sums.get(c.host) ?? 0) + 1);
        for (const [host, delta] of sums) ctx.emit('deltas', { host, delta });
      },
      query: (reads, q: HostsQuery, p) => hostsQuery(reads, q, `count/${p}`),
    })
    .stage('totals', {
      input: deltas,
      columnFamilies: { hosts: { mergeOperator: int64Add() } },
      onMessage: (ctx, d) => ctx.writes.merge('hosts', d.host, encodeInt64(d.delta)),
      query: (reads, q: HostsQuery, p) => hostsQuery(reads, q, `totals/${p}`),
    });
  return { clicks, deltas, topology };
}
