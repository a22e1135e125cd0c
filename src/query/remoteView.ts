import { ActorStoppedError, isShardflowError, terminalError } from '../index.js';
import { WEB_INDEX_STAGE, type PartitionAsker, type WebIndexRequest } from '../topology/clusterProtocol.js';
import type { PartitionReadMethod, PartitionReads, RawLink } from './partitionView.js';

/**
 * Default longest wait of one remote read for its answer, in ms: 60 s. A read of a moving
 * partition waits from its old owner's closing of the request consumer to the next owner's
 * start, seconds (docs/cluster.md, "Queries during a move", has the figures); a read still
 * unanswered after this is of a partition nobody runs (unowned, or refused by its workers),
 * answered 503 rather than after the cluster client's 10-minute default
 * (`DEFAULT_REMOTE_ASK_TIMEOUT_MS`, meant for asks that wait on metric barriers).
 */
export const REMOTE_READ_TIMEOUT_MS = 60_000;

/** Options of {@link remotePartitionView}. */
export interface RemotePartitionViewOptions {
  /** Longest wait of one read, ms (default {@link REMOTE_READ_TIMEOUT_MS}). */
  readonly timeoutMs?: number;
}

/**
 * The reads of web-index partition `p` on a cluster: each call is asked of the partition's
 * owner through the broker (`{ kind: 'read' }`, answered on its reader's view), so the query
 * API of any process routes each key to the worker that owns it. Never `closed`: a partition
 * that moves is asked again on its next owner by the cluster client. Link values come back
 * as bytes and are handed on as Buffers, as a local view gives them.
 * @throws what the client throws (`RemoteAskError` with the owner's error); ActorStoppedError
 *   (`terminal`: the query service does not ask again; HTTP 503) when no owner answered
 *   within `timeoutMs`
 */
export function remotePartitionView(client: PartitionAsker, p: number, options: RemotePartitionViewOptions = {}): PartitionReads {
  const timeoutMs = options.timeoutMs ?? REMOTE_READ_TIMEOUT_MS;
  const read = async (method: PartitionReadMethod, ...args: unknown[]): Promise<any> => {
    try {
      return await client.ask(WEB_INDEX_STAGE, p, { kind: 'read', method, args } satisfies WebIndexRequest, { timeoutMs });
    } catch (err) {
      if (!isShardflowError(err) || err.code !== 'SF_ERR_ASK_TIMEOUT') throw err;
      throw terminalError(new ActorStoppedError(`partition ${p} of the web index answered no ${method} read within ${timeoutMs} ms: no worker runs it (unowned, or refused: see \`shardflow cluster status\`)`, { cause: err }));
    }
  };
  return {
    closed: false,
    page: (url) => read('page', url),
    outlinks: (url) => read('outlinks', url),
    backlinks: async (url) => ((await read('backlinks', url)) as RawLink[]).map((l) => ({ url: l.url, value: Buffer.from(l.value.buffer, l.value.byteOffset, l.value.byteLength), ...(typeof l.metric === 'number' ? { metric: l.metric } : {}) })),
    rawScores: (urls) => read('rawScores', urls),
    hostPages: (host, limit) => read('hostPages', host, limit),
    summary: (limit, hostLimit) => read('summary', limit, ...(hostLimit !== undefined ? [hostLimit] : [])),
    frontierStates: () => read('frontierStates'),
    crawlGaps: (examples) => read('crawlGaps', ...(examples !== undefined ? [examples] : [])),
    hostIndex: () => read('hostIndex'),
  };
}
