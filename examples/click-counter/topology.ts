// The click counter's topology, apart from main.ts so that `shardflow worker --topology
// examples/click-counter/topology.ts` can load it (its default export is the Topology).
import { Topology, decodeInt64, decodeRecord, defineNamespace, encodeInt64, encodeRecord, int64Add, msgpackCodec, record } from 'shardflow';

export interface Click { readonly host: string; readonly path: string; readonly ms: number }
export interface HostStats { readonly clicks: number; readonly firstMs: number; readonly lastMs: number }

const isClick = (v: unknown): v is Click =>
  typeof v === 'object' && v !== null && typeof (v as Click).host === 'string' && typeof (v as Click).path === 'string' && Number.isInteger((v as Click).ms);

export const clicks = defineNamespace('clicks', { codec: msgpackCodec('Click', isClick), partitions: 8, key: (c: Click) => c.host });

export const topology = Topology.create('click-counter').stage('count', {
  input: clicks,
  columnFamilies: {
    clicks: { mergeOperator: int64Add() },
    stats: { mergeOperator: record({ clicks: 'sum', firstMs: 'min', lastMs: 'max' }) },
  },
  onMessage(ctx, click) {
    ctx.writes.merge('clicks', click.host, encodeInt64(1));
    ctx.writes.merge('stats', click.host, encodeRecord({ clicks: 1, firstMs: click.ms, lastMs: click.ms }));
  },
  // Every host of the partition with its int64 count and its record.
  async query(reads, _request: 'hosts') {
    const out: Array<{ host: string; clicks: bigint; stats: HostStats }> = [];
    for await (const [host, count] of reads.iterate('clicks')) {
      out.push({ host: host.toString(), clicks: decodeInt64(count), stats: decodeRecord<HostStats>((await reads.get('stats', host))!) });
    }
    return out;
  },
});

export default topology;
