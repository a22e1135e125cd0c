import { waitStreamsQuiet, type Clock, type QuietReport, type SentStream, type StreamFlowReport } from '../index.js';
import { WEB_INDEX_STAGE, webIndexStreamReceiver, type PartitionAsker } from '../topology/clusterProtocol.js';

export type { PartitionAsker } from '../topology/clusterProtocol.js';


/** Every web-index partition's flow report (`{ kind: 'flow' }`), in partition order. @throws the client's errors */
export async function collectFlow(client: PartitionAsker, partitions: number): Promise<StreamFlowReport[]> {
  return (await Promise.all(Array.from({ length: partitions }, (_, p) => client.ask(WEB_INDEX_STAGE, p, { kind: 'flow' })))) as StreamFlowReport[];
}

/**
 * The receiver's applied mark of `stream` in a collection of web-index flow reports (-1 when
 * it applied nothing of that producer, or nobody receives the topic).
 */
export function appliedMark(reports: readonly StreamFlowReport[], stream: Pick<SentStream, 'producer' | 'topic'>): number {
  const r = webIndexStreamReceiver(stream.topic);
  return (r && reports[r.report]?.consumers.find((c) => c.consumer === r.consumer)?.applied[stream.producer]) ?? -1;
}

/**
 * Waits until a cluster's web index is quiet: every stream a partition's outbox committed, and
 * every stream of `external` (a loader's), applied by its receiver, in two consecutive
 * identical collections of the partitions' flow reports (`waitStreamsQuiet`). The reports come
 * from the stores, so they hold across worker failures: a partition that moves meanwhile
 * reports the same after its restart.
 * @throws JobStalledError after `timeoutMs` (default 10 minutes) naming what is unapplied; the client's errors
 */
export function waitClusterQuiet(client: PartitionAsker, partitions: number, external: readonly SentStream[], options: { readonly clock?: Clock; readonly timeoutMs?: number; readonly signal?: AbortSignal } = {}): Promise<QuietReport> {
  return waitStreamsQuiet(() => collectFlow(client, partitions), { receiver: webIndexStreamReceiver, external, pollMs: 100, ...options });
}
