import { topic, topicName, type Broker, type Consumer, type Producer } from '../../runtime/brokers/index.js';
import { feedDeliveries, messageKey, partitionId, producerId, sequence, type Behavior, type Deliveries, type FlowCounters, type PayloadTooLargeError } from '../../index.js';
import { Namespaces } from '../namespaces.js';
import type { Partitioner } from '../partition/hostPartitioner.js';
import { randomUUID } from 'node:crypto';
import type { Subscription } from 'rxjs';
import type { Logger } from 'pino';
import { crawlRequestCodec, fetchCodec, type FetchResult } from '../messages.js';
import type { HttpFetcher } from './httpFetch.js';

/**
 * Most bytes of page bodies (as UTF-16 code units, about bytes for HTML) per `fetches/<p>`
 * message: a delivery of 16 requests could otherwise put 16 bodies of `maxBodyBytes` (8 MiB
 * for `shardflow crawl`) in one 128 MiB message; the broker's `maxPayloadBytes` when smaller
 * (Pulsar's 784,896). A result larger than this travels alone; a message the broker still
 * refuses as too large is sent again as two halves, and a single result it refuses is
 * stored without its body, with the reason.
 */
export const FETCH_MESSAGE_BODY_BYTES = 4 * 1024 * 1024;

/**
 * `results` in runs for one `fetches/<p>` message each, in order: a run's bodies (and 64
 * bytes per outlink) sum to at most `budget`, except a run of one larger result.
 */
export function fetchMessageRuns(results: readonly FetchResult[], budget = FETCH_MESSAGE_BODY_BYTES): FetchResult[][] {
  const runs: FetchResult[][] = [];
  let run: FetchResult[] = [];
  let size = 0;
  for (const r of results) {
    const bytes = (r.body?.length ?? 0) + 64 * (r.outlinks?.length ?? 0);
    if (run.length > 0 && size + bytes > budget) {
      runs.push(run);
      run = [];
      size = 0;
    }
    run.push(r);
    size += bytes;
  }
  if (run.length > 0) runs.push(run);
  return runs;
}

/** What a crawler needs. */
export interface CrawlerOptions {
  readonly name: string;
  readonly broker: Broker;
  readonly partitioner: Partitioner;
  readonly fetcher: HttpFetcher;
  readonly counters: FlowCounters;
  readonly log: Logger;
  /** Fetches in flight per crawler. Default 8. */
  readonly concurrency?: number;
}

interface CrawlerState {
  readonly consumers: Consumer[];
  readonly feeds: Subscription[];
  readonly producers: Map<number, Producer>;
  readonly producerName: ReturnType<typeof producerId>;
  /** Next sequence per target partition of `producerName`. */
  readonly sequences: Map<number, number>;
}

/**
 * A crawler: joins the shared subscription `crawlers` of every `crawl-requests/<p>` topic,
 * fetches each requested URL, and publishes the result to `fetches/<p>`, p the partition of
 * the URL's host (the results of one delivery per partition in as few messages as
 * `FETCH_MESSAGE_BODY_BYTES` allows). Stateless: a result is published before its request is acked, so a crash
 * can fetch a page twice but never loses one (the indexer stores pages idempotently). Each
 * incarnation is a new producer, so its sequences start at 0 under a fresh name.
 */
export function crawler(options: CrawlerOptions): Behavior<Deliveries, CrawlerState> {
  const concurrency = options.concurrency ?? 8;
  return {
    kind: 'crawler',
    async start(ctx) {
      const consumers: Consumer[] = [];
      const feeds: Subscription[] = [];
      for (let p = 0; p < options.partitioner.partitions; p++) {
        const c = await options.broker.subscribe(topic(Namespaces.crawlRequests, partitionId(p)), {
          subscription: 'crawlers',
          type: 'shared',
          receiverQueueSize: 16,
        });
        consumers.push(c);
        feeds.push(feedDeliveries(c, (d) => ctx.self.tell(d), ctx.fail, { maxCount: 16, maxDelayMs: 2 }));
      }
      return { consumers, feeds, producers: new Map(), producerName: producerId(`${options.name}/${randomUUID()}`), sequences: new Map() };
    },
    async receive(state, d, ctx) {
      if (!state.consumers.includes(d.consumer)) return; // from a previous incarnation: redelivered to this one
      const urls: string[] = [];
      const dead = new Set<(typeof d.messages)[number]>();
      for (const m of d.messages) {
        try {
          urls.push(...crawlRequestCodec.decode(m.payload).urls);
        } catch (err) {
          options.log.warn({ topic: topicName(m.topic), reason: (err as Error).message }, 'crawl request dead-lettered');
          await d.consumer.deadLetter(m, (err as Error).message);
          dead.add(m);
        }
      }
      const results: FetchResult[] = new Array(urls.length);
      let next = 0;
      const worker = async () => {
        while (next < urls.length) {
          const i = next++;
          results[i] = await options.fetcher.fetch(urls[i]!, ctx.clock.now());
        }
      };
      await Promise.all(Array.from({ length: Math.min(concurrency, urls.length) }, worker));
      const byPartition = new Map<number, FetchResult[]>();
      for (const r of results) {
        const p = options.partitioner.forUrl(r.url);
        let list = byPartition.get(p);
        if (!list) byPartition.set(p, (list = []));
        list.push(r);
      }
      for (const [p, list] of byPartition) {
        let producer = state.producers.get(p);
        if (!producer) {
          producer = await options.broker.producer(topic(Namespaces.fetches, partitionId(p)), { producer: state.producerName });
          state.producers.set(p, producer);
        }
        const send = producer;
        /**
         * Sends one run as one message; a run the broker refuses as too large (its bodies fit
         * the budget by length, not by encoded bytes) goes again as two halves, and only a
         * single result is stored without its body, with the reason.
         */
        const sendRun = async (run: FetchResult[]): Promise<void> => {
          // Sequences of this actor's producer name, so that the counters know each message.
          const seq = state.sequences.get(p) ?? 0;
          state.sequences.set(p, seq + 1);
          const key = { producer: state.producerName, topic: topicName(topic(Namespaces.fetches, partitionId(p))), sequence: seq };
          try {
            await options.counters.sending(Namespaces.fetches, key, () => send.send(fetchCodec.encode({ type: 'fetches', results: run }), { sequence: sequence(seq) }));
          } catch (err) {
            if ((err as { code?: unknown }).code !== 'SF_ERR_PAYLOAD_TOO_LARGE') throw err;
            if (run.length > 1) {
              // Nothing was sent under `seq`: the first half takes it.
              state.sequences.set(p, seq);
              const half = run.length >> 1;
              await sendRun(run.slice(0, half));
              await sendRun(run.slice(half));
              return;
            }
            // Larger than one broker message alone: the page goes on without its body, stored
            // as oversized with the reason, like a body over maxBodyBytes.
            const { bytes, limit } = err as PayloadTooLargeError;
            const stripped = run.map((r) => (r.body === undefined ? r : withoutBody(r, `oversized: the result of ${bytes} bytes does not fit one broker message (maxPayloadBytes ${limit})`)));
            options.log.warn({ urls: run.map((r) => r.url), bytes, limit }, 'fetch result too large for one broker message: stored without its body');
            await options.counters.sending(Namespaces.fetches, key, () => send.send(fetchCodec.encode({ type: 'fetches', results: stripped }), { sequence: sequence(seq) }));
          }
        };
        const budget = Math.min(FETCH_MESSAGE_BODY_BYTES, options.broker.maxPayloadBytes ?? FETCH_MESSAGE_BODY_BYTES);
        for (const run of fetchMessageRuns(list, budget)) await sendRun(run);
      }
      // Dead letters are settled already; each ack settles its message (if one fails, the
      // rest come back and are counted then), in the order delivered.
      for (const m of d.messages) {
        if (!dead.has(m)) await d.consumer.ack(m);
        options.counters.onSettled(Namespaces.crawlRequests, messageKey(m));
      }
    },
    async stop(state) {
      for (const f of state.feeds) f.unsubscribe();
      await Promise.all(state.consumers.map((c) => c.close()));
      await Promise.all([...state.producers.values()].map((p) => p.close()));
    },
  };
}

/** `r` without its body, with `error` (kept with any earlier error). */
function withoutBody(r: FetchResult, error: string): FetchResult {
  const { body: _body, ...rest } = r;
  return { ...rest, error: r.error ? `${r.error}; ${error}` : error };
}
