import { WEB_INDEX_STAGE, type PartitionAsker, type WebIndexRequest } from '../topology/clusterProtocol.js';
import type { PartitionReadMethod, PartitionReads, RawLink } from './partitionView.js';

/**
 * The reads of web-index partition `p` on a cluster: each call is asked of the partition's
 * owner through the broker (`{ kind: 'read' }`, answered on its reader's view), so the query
 * API of any process routes each key to the worker that owns it. Never `closed`: a partition
 * that moves is asked again on its next owner by the cluster client. Link values come back
 * as bytes and are handed on as Buffers, as a local view gives them.
 * @throws what the client throws (`RemoteAskError` with the owner's error, a timeout)
 */
export function remotePartitionView(client: PartitionAsker, p: number): PartitionReads {
  const read = (method: PartitionReadMethod, ...args: unknown[]): Promise<any> => client.ask(WEB_INDEX_STAGE, p, { kind: 'read', method, args } satisfies WebIndexRequest);
  return {
    closed: false,
    page: (url) => read('page', url),
    outlinks: (url) => read('outlinks', url),
    backlinks: async (url) => ((await read('backlinks', url)) as RawLink[]).map((l) => ({ url: l.url, value: Buffer.from(l.value.buffer, l.value.byteOffset, l.value.byteLength), ...(typeof l.metric === 'number' ? { metric: l.metric } : {}) })),
    rawScores: (urls) => read('rawScores', urls),
    hostPages: (host, limit) => read('hostPages', host, limit),
    summary: (limit, hostLimit) => read('summary', limit, ...(hostLimit !== undefined ? [hostLimit] : [])),
    frontierStates: () => read('frontierStates'),
    hostIndex: () => read('hostIndex'),
  };
}
