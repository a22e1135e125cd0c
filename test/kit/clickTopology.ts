import { Topology, decodeInt64, defineNamespace, encodeInt64, int64Add, msgpackCodec } from '../../src/index.js';

/**
 * The click counter of the data-dir tests (after examples/click-counter): `count` (8
 * partitions by host) merges +1 per click into an int64 per host and, once per batch, emits
 * one delta per host of the batch through its outbox to `totals` (2 partitions), which
 * merges them. `hooks.onApply` is called before each message is applied, in either stage
 * (the tests' seeded kill points).
 */
export interface Click { readonly host: string; readonly n: number }
interface Delta { readonly host: string; readonly delta: number }
const isClick = (v: unknown): v is Click => typeof (v as Click)?.host === 'string' && Number.isInteger((v as Click).n);
const isDelta = (v: unknown): v is Delta => typeof (v as Delta)?.host === 'string' && Number.isInteger((v as Delta).delta);

export const clicks = defineNamespace('clicks', { codec: msgpackCodec('Click', isClick), partitions: 8, key: (c: Click) => c.host });
const deltas = defineNamespace('host-deltas', { codec: msgpackCodec('Delta', isDelta), partitions: 2, key: (d: Delta) => d.host });

/** Called before each message is applied, with the stage applying it. */
export const hooks: { onApply?: (stage: 'count' | 'totals') => void } = {};

const hostsQuery = async (reads: { iterate(cf: 'hosts'): AsyncGenerator<[Buffer, Buffer]> }) => {
  const out: Array<[string, number]> = [];
  for await (const [k, v] of reads.iterate('hosts')) out.push([k.toString(), Number(decodeInt64(v))]);
  return out;
};

export const clickTopology = Topology.create('dd-clicks')
  .stage('count', {
    input: clicks,
    outputs: { deltas },
    columnFamilies: { hosts: { mergeOperator: int64Add() } },
    batching: { maxCount: 32, maxDelayMs: 2 },
    onMessage(ctx, click) {
      hooks.onApply?.('count');
      ctx.writes.merge('hosts', click.host, encodeInt64(1));
    },
    onBatch(ctx, batch) {
      for (const [host, delta] of tally(batch.map((c) => c.host))) ctx.emit('deltas', { host, delta });
    },
    query: (reads, _q: 'hosts') => hostsQuery(reads),
  })
  .stage('totals', {
    input: deltas,
    columnFamilies: { hosts: { mergeOperator: int64Add() } },
    onMessage(ctx, d) {
      hooks.onApply?.('totals');
      ctx.writes.merge('hosts', d.host, encodeInt64(d.delta));
    },
    query: (reads, _q: 'hosts') => hostsQuery(reads),
  });

/** Host of click number `n` (a global index over runs): 40 hosts, round robin with stride 7. */
export function hostOf(n: number): string {
  return `site-${(n * 7) % 40}.example`;
}

/** The ground truth of clicks `from .. from + count - 1`, added into `into` (clicks per host). */
export function addTruth(into: Map<string, number>, from: number, count: number): Map<string, number> {
  return tally(Array.from({ length: count }, (_, i) => hostOf(from + i)), into);
}

/** `hosts` counted per host, added into `into`. */
function tally(hosts: readonly string[], into = new Map<string, number>()): Map<string, number> {
  for (const h of hosts) into.set(h, (into.get(h) ?? 0) + 1);
  return into;
}
