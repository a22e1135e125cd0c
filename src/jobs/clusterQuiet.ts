import type { Clock } from '../index.js';
import { Namespaces } from '../actors/namespaces.js';
import { WEB_INDEX_STAGE } from '../topology/clusterProtocol.js';
import type { LoadedStream } from './graphLoader.js';

/** Asks a partition of a cluster wherever it runs: what a `ClusterClient` does. */
export interface PartitionAsker {
  ask(stage: string, partition: number, request: unknown, options?: { readonly timeoutMs?: number }): Promise<unknown>;
}

/** A stream sent and not applied yet: its producer, topic, last sequence sent and the receiver's mark. */
export interface UnappliedStream {
  readonly producer: string;
  readonly topic: string;
  readonly sent: number;
  readonly applied: number;
}

/** One collection of every partition's flow report. */
export interface ClusterFlow {
  /** Streams whose last sequence sent is above their receiver's applied mark. */
  readonly unapplied: readonly UnappliedStream[];
  /** The receiver's applied mark of a stream (-1 when none). */
  applied(stream: { readonly producer: string; readonly topic: string }): number;
}

/** Which consumer of the web index receives a topic's namespace. */
const RECEIVER: Readonly<Record<string, string>> = {
  [Namespaces.fetches]: 'indexer',
  [Namespaces.links]: 'backlinks',
  [Namespaces.metrics]: 'metrics',
};

/**
 * Waits until a cluster's web index is quiet: every stream a partition's outbox committed
 * (and every stream in `external`, such as a loader's) is applied by the consumer of its
 * topic's partition, in two consecutive collections of the partitions' flow reports that are
 * identical (a message in flight between the two reads of a collection changes the second;
 * Mattern's four-counter method, "Algorithms for distributed termination detection", 1987).
 * Reports come from the stores (outbox sequences and applied marks), so they survive worker
 * failures: a partition that moves mid-wait reports the same after its restart.
 * @param options.once collect once and return (no waiting)
 * @throws the client's errors
 */
export async function waitClusterQuiet(
  client: PartitionAsker,
  partitions: number,
  external: readonly LoadedStream[],
  clock: Clock,
  options: { readonly once?: boolean; readonly pollMs?: number; readonly onWait?: (flow: ClusterFlow) => void } = {},
): Promise<ClusterFlow> {
  let previous: string | undefined;
  for (;;) {
    const reports = (await Promise.all(Array.from({ length: partitions }, (_, p) => client.ask(WEB_INDEX_STAGE, p, { kind: 'flow' })))) as FlowReport[];
    const flow = clusterFlow(reports, external);
    if (options.once) return flow;
    const fingerprint = JSON.stringify(reports);
    if (flow.unapplied.length === 0 && fingerprint === previous) return flow;
    previous = flow.unapplied.length === 0 ? fingerprint : undefined;
    if (flow.unapplied.length > 0) options.onWait?.(flow);
    await new Promise<void>((resolve) => clock.setTimeout(resolve, options.pollMs ?? 100));
  }
}

/** A partition's flow report as the web index answers `{ kind: 'flow' }`. */
interface FlowReport {
  readonly sent: ReadonlyArray<{ readonly producer: string; readonly topic: string; readonly next: number }>;
  readonly applied: ReadonlyArray<{ readonly consumer: string; readonly producer: string; readonly sequence: number }>;
}

function clusterFlow(reports: readonly FlowReport[], external: readonly LoadedStream[]): ClusterFlow {
  const marks = new Map<string, number>();
  reports.forEach((r, p) => {
    for (const a of r.applied) marks.set(`${a.consumer}@${p}|${a.producer}`, a.sequence);
  });
  const applied = (s: { producer: string; topic: string }): number => {
    const slash = s.topic.lastIndexOf('/');
    const consumer = RECEIVER[s.topic.slice(0, slash)];
    return consumer === undefined ? -1 : (marks.get(`${consumer}@${s.topic.slice(slash + 1)}|${s.producer}`) ?? -1);
  };
  const unapplied: UnappliedStream[] = [];
  for (const s of [...reports.flatMap((r) => r.sent), ...external]) {
    const a = applied(s);
    if (a < s.next - 1) unapplied.push({ producer: s.producer, topic: s.topic, sent: s.next - 1, applied: a });
  }
  return { unapplied, applied };
}
