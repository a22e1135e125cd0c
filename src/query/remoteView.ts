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

/** How often a remote read that waits asks whether its partition was refused, ms. */
export const REFUSAL_CHECK_MS = 1000;

/** Options of {@link remotePartitionView}. */
export interface RemotePartitionViewOptions {
  /** Longest wait of one read, ms (default {@link REMOTE_READ_TIMEOUT_MS}). */
  readonly timeoutMs?: number;
  /**
   * Why partition `p` runs nowhere until an operator acts (refused by its workers: a
   * damaged checkpoint, denied credentials), or undefined; asked every
   * {@link REFUSAL_CHECK_MS} while a read waits, so that a read of a refused partition fails
   * at once with the reason instead of after `timeoutMs` (found by a new user: a query server
   * started while one partition was refused answered every read 503 after 60 s, since scores
   * need every partition's summary). Without it, such a read waits `timeoutMs`.
   */
  readonly refused?: (p: number) => Promise<string | undefined>;
}

/**
 * `RemotePartitionViewOptions.refused` from a cluster's status (read at most once per
 * `REFUSAL_CHECK_MS`, shared by every partition): the reason of a web-index partition whose
 * state is `failed`. A status that cannot be read counts as no refusal.
 */
export function refusedFromStatus(status: () => Promise<{ readonly partitions: ReadonlyArray<{ readonly stage: string; readonly partition: number; readonly state: string; readonly reason?: string }> }>): (p: number) => Promise<string | undefined> {
  let cached: { at: number; value: Promise<Map<number, string>> } | undefined;
  return async (p) => {
    if (!cached || Date.now() - cached.at >= REFUSAL_CHECK_MS) {
      const value = status().then(
        (s) => new Map(s.partitions.filter((x) => x.stage === WEB_INDEX_STAGE && x.state === 'failed').map((x) => [x.partition, x.reason ?? 'refused'])),
        () => new Map<number, string>(),
      );
      cached = { at: Date.now(), value };
    }
    return (await cached.value).get(p);
  };
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
  const { refused } = options;
  const read = async (method: PartitionReadMethod, ...args: unknown[]): Promise<any> => {
    const asked = client.ask(WEB_INDEX_STAGE, p, { kind: 'read', method, args } satisfies WebIndexRequest, { timeoutMs });
    let timer: NodeJS.Timeout | undefined;
    let done = false;
    try {
      if (!refused) return await asked;
      const refusal = new Promise<never>((_, reject) => {
        const check = () => {
          timer = setTimeout(() => {
            void refused(p).then((why) => {
              if (done) return;
              if (why !== undefined) reject(terminalError(new ActorStoppedError(`partition ${p} of the web index is refused by its workers, so it answers no ${method} read until an operator acts: ${why}`)));
              else check();
            });
          }, REFUSAL_CHECK_MS);
        };
        check();
      });
      asked.catch(() => {}); // when the refusal wins, the ask's own timeout later is not an unhandled rejection
      return await Promise.race([asked, refusal]);
    } catch (err) {
      if (!isShardflowError(err) || err.code !== 'SF_ERR_ASK_TIMEOUT') throw err;
      throw terminalError(new ActorStoppedError(`partition ${p} of the web index answered no ${method} read within ${timeoutMs} ms: no worker runs it (unowned, or refused: see \`shardflow cluster status\`)`, { cause: err }));
    } finally {
      done = true;
      clearTimeout(timer);
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
