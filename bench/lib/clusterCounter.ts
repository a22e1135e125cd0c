// The topology of bench/cluster-counter.ts, as a module `shardflow worker --topology` loads (default
// export): a click-counter-like stage `count` over 16 partitions keyed by host, an int64 add
// merge per message into column family `hosts`.
import { Topology, defineNamespace, encodeInt64, int64Add, msgpackCodec } from '../../src/index.js';

/** One message: a host name and a sequence number. */
export interface Hit { readonly host: string; readonly n: number }
const isHit = (v: unknown): v is Hit => typeof (v as Hit)?.host === 'string' && Number.isInteger((v as Hit).n);

/** Partitions of the benchmark's namespace. */
export const PARTITIONS = 16;
export const hits = defineNamespace('hits', { codec: msgpackCodec('Hit', isHit), partitions: PARTITIONS, key: (h: Hit) => h.host });
export const topology = Topology.create('bench-cluster').stage('count', {
  input: hits,
  columnFamilies: { hosts: { mergeOperator: int64Add() } },
  onMessage: (ctx, h) => ctx.writes.merge('hosts', h.host, encodeInt64(1)),
});
export default topology;
