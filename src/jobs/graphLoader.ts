import { randomUUID } from 'node:crypto';
import { topic, topicName, type Broker, type Producer, type Topic } from '../runtime/brokers/index.js';
import { hostOf, PayloadTooLargeError, producerId, sequence, type FlowCounters, type PartitionId, type SentStream } from '../index.js';
import { Namespaces } from '../actors/namespaces.js';
import type { Partitioner } from '../actors/partition/hostPartitioner.js';
import type { WebGraph } from '../replay/graphFile.js';
import { fetchCodec, type FetchResult, type LinkFeatures, type Outlink } from '../actors/messages.js';

/** Most fetch results per `fetches` message of a loader. */
export const PAGES_PER_MESSAGE = 64;

/**
 * Most bytes of a loader's `fetches` message, estimated by {@link fetchResultBytes}: 1 MiB,
 * within the brokers' default 5 MiB `maxPayloadBytes` (64 pages of many long URLs were not);
 * less on a broker that takes less ({@link loaderMessageBytes}).
 */
export const FETCH_MESSAGE_BYTES = 1 << 20;

/**
 * The estimated bytes at which a loader cuts its `fetches` messages on a broker whose
 * `maxPayloadBytes` is `maxPayloadBytes`: FETCH_MESSAGE_BYTES, or two thirds of a smaller
 * limit (Pulsar over its WebSocket proxy takes 784,896 bytes: a 1 MiB message of ASCII URLs
 * was refused). A function of the broker's limit alone, so that a load started again on the
 * same broker cuts its messages where the first did (the indexers skip by sequence).
 */
export function loaderMessageBytes(maxPayloadBytes: number | undefined): number {
  return maxPayloadBytes === undefined ? FETCH_MESSAGE_BYTES : Math.min(FETCH_MESSAGE_BYTES, Math.floor((maxPayloadBytes * 2) / 3));
}

/**
 * A fetch result's share of a loader's message, in bytes, estimated from its URLs' lengths
 * (UTF-16 code units, at most 3 UTF-8 bytes each: a message of 1 MiB estimated stays under
 * 3 MiB of URLs), 16 bytes more for the result and for each outlink: a function of the graph
 * alone, so that a cluster client counts the messages a load sends without encoding them
 * ({@link loaderMessageCounts}).
 */
export function fetchResultBytes(r: FetchResult): number {
  let bytes = r.url.length + 16;
  for (const o of r.outlinks ?? []) bytes += o.target.length + 16;
  return bytes;
}

/** Splits a partition's fetch results into messages: true when `r` must start a new one after `pending` results of `bytes`. */
function startsMessage(pending: number, bytes: number, r: number, budget: number): boolean {
  return pending >= PAGES_PER_MESSAGE || (pending > 0 && bytes + r > budget);
}

/**
 * The `fetches` messages {@link publishFetches} sends for `results`, per partition (indexed
 * by partition number): what a cluster client expects a load to have sent.
 * @param maxPayloadBytes the `maxPayloadBytes` of the broker the load sends on (its messages are cut by `loaderMessageBytes` of it, as `publishFetches` cuts them)
 */
export function loaderMessageCounts(partitioner: Partitioner, results: Iterable<FetchResult>, maxPayloadBytes: number | undefined): number[] {
  const budget = loaderMessageBytes(maxPayloadBytes);
  const counts = new Array<number>(partitioner.partitions).fill(0);
  const open = new Map<PartitionId, { pending: number; bytes: number }>();
  for (const r of results) {
    const p = partitioner.forUrl(r.url);
    let out = open.get(p);
    if (!out) open.set(p, (out = { pending: 0, bytes: 0 }));
    const b = fetchResultBytes(r);
    if (startsMessage(out.pending, out.bytes, b, budget)) {
      counts[p]!++;
      out.pending = 0;
      out.bytes = 0;
    }
    out.pending++;
    out.bytes += b;
  }
  for (const [p, out] of open) if (out.pending > 0) counts[p]!++;
  return counts;
}

/**
 * A page of a graph file as a fetch result: status 200 with its distinct outlinks (no HTML),
 * features neutral: no anchor text, body region, position 0 (a graph file has no layout),
 * same-host flag from the hosts, self-link flag for a link to the page itself (the URL as written).
 */
export function graphPage(url: string, targets: readonly string[], fetchedAt = 0): FetchResult {
  const distinct = [...new Set(targets)];
  const host = safeHost(url);
  // Three shared (frozen) feature objects, not one per link: the codecs send each once per
  // batch and `encodeLinkValue` finds their bytes by identity. A link to the page itself is
  // a self link (a weight table's `selfLink` applies to it; found by a new user: it did not).
  const outlinks: Outlink[] = distinct.map((target) => ({ target, features: target === url ? SELF_LINK : safeHost(target) === host ? SAME_HOST : OTHER_HOST }));
  return { url, status: 200, fetchedAt, outlinks };
}

/** The features of a graph file's link (neutral: no anchor, body, position 0), same host or not, or to the page itself. */
const SAME_HOST: LinkFeatures = Object.freeze({ anchor: '', position: 0, rel: Object.freeze([]), sameHost: true, region: 'body' });
const OTHER_HOST: LinkFeatures = Object.freeze({ ...SAME_HOST, sameHost: false });
const SELF_LINK: LinkFeatures = Object.freeze({ ...SAME_HOST, selfLink: true });

/**
 * Publishes fetch results to `fetches/<p>` (p the partition of each URL), at most 64 and
 * about `loaderMessageBytes(broker.maxPayloadBytes)` per message (one result at least; {@link loaderMessageCounts}
 * counts them), in order per partition, as producer `producer` (default: a fresh `loader/<uuid>`), with
 * sequences from 0 per topic. `results` is consumed as it is iterated (at most 64 results
 * per partition are held), so a generator loads a graph without materialising every fetch
 * result first. Counts what it sends in `counters` so that quiescence detection waits for it.
 *
 * The same results in the same order under the same producer name give the same messages
 * and sequences: a loader started again after a crash (a cluster client resuming its job)
 * sends them again and the indexers skip what they applied (their applied marks).
 * @returns the streams sent, one per topic: the external streams of quiet detection across
 *   processes (`waitStreamsQuiet`)
 * @throws whatever the broker's `send` throws (the failed send is taken back from `counters`)
 */
export async function publishFetches(broker: Broker, partitioner: Partitioner, counters: FlowCounters, results: Iterable<FetchResult>, producer?: string): Promise<SentStream[]> {
  const name = producerId(producer ?? `loader/${randomUUID()}`);
  const budget = loaderMessageBytes(broker.maxPayloadBytes);
  type Open = { topic: Topic; producer: Producer; pending: FetchResult[]; bytes: number; seq: number };
  const open = new Map<PartitionId, Open>();
  const flush = async (out: Open) => {
    const key = { producer: name, topic: topicName(out.topic), sequence: out.seq };
    try {
      await counters.sending(Namespaces.fetches, key, () => out.producer.send(fetchCodec.encode({ type: 'fetches', results: out.pending }), { sequence: sequence(out.seq) }));
    } catch (err) {
      if (err instanceof PayloadTooLargeError && out.pending.length === 1) {
        const page = out.pending[0]!;
        throw new PayloadTooLargeError(`page ${page.url.slice(0, 200)}: its ${page.outlinks?.length ?? 0} outlinks make a fetches message of ${err.bytes} bytes, over the broker's maxPayloadBytes (${err.limit}): drop some of its links, or use a broker that takes larger messages`, err.bytes, err.limit, { cause: err });
      }
      throw err;
    }
    out.pending = [];
    out.bytes = 0;
    out.seq++;
  };
  let failed = false;
  try {
    for (const r of results) {
      const p = partitioner.forUrl(r.url);
      let out = open.get(p);
      if (!out) {
        const t = topic(Namespaces.fetches, p);
        open.set(p, (out = { topic: t, producer: await broker.producer(t, { producer: name }), pending: [], bytes: 0, seq: 0 }));
      }
      const b = fetchResultBytes(r);
      if (startsMessage(out.pending.length, out.bytes, b, budget)) await flush(out);
      out.pending.push(r);
      out.bytes += b;
    }
    for (const out of open.values()) if (out.pending.length > 0) await flush(out);
    return [...open.values()].map((out) => ({ producer: name, topic: topicName(out.topic), next: out.seq }));
  } catch (err) {
    failed = true;
    throw err;
  } finally {
    // Close every producer; a close error is reported only when nothing failed before it.
    const closed = await Promise.allSettled([...open.values()].map((out) => out.producer.close()));
    const error = closed.find((c): c is PromiseRejectedResult => c.status === 'rejected');
    if (error && !failed) throw error.reason;
  }
}

/**
 * The pages of `graph` as fetch results (graphPage), made one at a time. A URL that the graph
 * names only as a link target (not among its pages file's `listed` pages, no links of its
 * own) is sent with `ifAbsent`: a page without outlinks when none is stored, else left as it
 * is. So a graph applied as a change (`rank --update`) restates the outlinks of the pages it
 * lists and of the sources of its links, and a link to a stored page keeps that page's own
 * outlinks (found by a new user: they were wiped, so adding one link meant restating every
 * page reachable from it).
 */
export function* graphPages(graph: WebGraph, fetchedAt = 0): Generator<FetchResult> {
  const listed = graph.listed ?? graph.pages.length;
  for (let i = 0; i < graph.pages.length; i++) {
    const url = graph.pages[i]!;
    const targets = graph.links.get(url);
    const page = graphPage(url, targets ?? [], fetchedAt);
    yield i < listed || targets !== undefined ? page : { ...page, ifAbsent: true };
  }
}

function safeHost(url: string): string {
  try {
    return hostOf(url);
  } catch {
    return '';
  }
}
