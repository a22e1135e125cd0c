import { Packr } from 'msgpackr';
import type { Subscription } from 'rxjs';
import { topic, type Consumer } from '../../runtime/brokers/index.js';
import type { Store, WriteBatch } from '../../storage/index.js';
import { feedDeliveries, hostOf, ownerPriority, isShardflowError, type ActorContext, type Behavior, type Cancel, type Deliveries, type StreamMarks, type StreamOutbox } from '../../index.js';
import { Namespaces } from '../namespaces.js';
import { crawlRequestCodec, fetchCodec, type FetchResult } from '../messages.js';
import type { RobotsFetch } from '../crawler/httpFetch.js';
import { openPartitionOutbox, partitionMarks } from '../partition/streams.js';
import type { PartitionEnv } from '../partition/env.js';
import { ColumnFamilies, type FrontierEntry, type RobotsRecord } from '../partition/schema.js';
import { resolveCrawlPolicyOptions, type CrawlPolicyOptions, type ResolvedCrawlPolicyOptions } from './crawlPolicyOptions.js';
import { dueHeap, type DueUrl } from './dueHeap.js';
import { scoreOf } from '../partition/livePages.js';
import { robotsRules, type RobotsRules } from './robotsRules.js';
import { urlHeap, type QueuedUrl } from './urlHeap.js';
import type { Heap } from 'heap-js';

/** Messages of the crawl policy. */
export type CrawlPolicyMessage =
  /** URLs to crawl from outside (canonical): unknown ones are queued first (seed priority). */
  | { readonly type: 'seed'; readonly urls: readonly string[] }
  /** New rows in `pending` (written by the backlinks actor): look at them. */
  | { readonly type: 'poke' }
  /** Crawl these known URLs again now, whatever their `dueAt` (unknown ones are ignored). */
  | { readonly type: 'recrawl'; readonly urls: readonly string[] }
  /** The GC dropped `host`: forget its queue and never request its URLs again. */
  | { readonly type: 'drop-host'; readonly host: string }
  /**
   * Whether the policy holds no crawl work, answered with a {@link CrawlDrain} after taking
   * in `pending` and dispatching (as every message does): what a crawl client on a cluster
   * asks with the partitions' flow reports (`WebIndexRequest` `drained`).
   */
  | { readonly type: 'drained' }
  /** Fetch results from `fetches/<p>` (subscription `crawl-policy`): the feedback that frees hosts. */
  | Deliveries
  | RobotsFetched
  | Tick;

/** Internal: a robots.txt fetch ended. */
interface RobotsFetched {
  readonly type: 'shardflow.crawl-policy.robots';
  readonly origin: string;
  readonly fetch: RobotsFetch;
}

/** Internal: the policy's timer fired (politeness delay over, recrawl due, request overdue). */
interface Tick {
  readonly type: 'shardflow.crawl-policy.tick';
}

/**
 * What a crawl policy holds, the answer to `drained`: URLs requested without a result yet,
 * robots.txt fetches under way, and hosts with queued URLs it will send (budget left). The
 * policy is drained when all three are 0: every URL it ever queued was requested and its
 * result applied (or it was blocked, out of scope, or its host dropped).
 */
export interface CrawlDrain {
  readonly drained: boolean;
  readonly requested: number;
  readonly robots: number;
  readonly readyHosts: number;
}

/** Priority of seeds: above any score estimate (scores are at most the number of pages). */
export const SEED_PRIORITY = 1e15;

/** Key prefix in `meta` of dropped hosts (`dropped-host 0x00 <host>`), written by the GC. */
export const DROPPED_HOST_PREFIX = 'dropped-host\u0000';

interface HostState {
  readonly host: string;
  readonly queue: Heap<QueuedUrl>;
  inFlight: number;
  /** Earliest start of the next request to this host (ms). */
  nextAt: number;
  /** Largest `Crawl-delay` of the host's origins, in ms. */
  crawlDelayMs: number;
}

interface CachedRobots {
  readonly rules: RobotsRules;
  readonly expiresAt: number;
}

interface CrawlPolicyState {
  readonly store: Store;
  readonly outbox: StreamOutbox;
  readonly marks: StreamMarks;
  readonly consumer: Consumer;
  readonly feed: Subscription;
  readonly hosts: Map<string, HostState>;
  /** Hosts with queued URLs. */
  readonly ready: Set<HostState>;
  /** URL -> when its crawl request was sent. */
  readonly requested: Map<string, number>;
  readonly due: Heap<DueUrl>;
  readonly robots: Map<string, CachedRobots>;
  readonly robotsFetching: Set<string>;
  /**
   * Origins whose robots.txt record the store was asked for and did not hold. The policy is
   * the only writer of its `robots` column family (`onRobots`, which caches what it stores),
   * so the answer holds until then: without it, every dispatch asked the store again for
   * every host waiting on a fetch slot (an await per host per message, quadratic in the
   * hosts of a partition: a polblogs crawl of 1,451 hosts took minutes).
   */
  readonly robotsNotStored: Set<string>;
  readonly dropped: Set<string>;
  /**
   * `store.writesTo(pending)` after the last intake that emptied `pending`: while it has not
   * changed, nothing was written there since and the intake skips its scan (-1: scan). Each
   * scan walked the tombstones of every key taken before (deleted keys stay in the memtable
   * and SST files until compacted), once per message: quadratic over a crawl.
   */
  pendingSeen: number;
  timer: { at: number; cancel: Cancel } | undefined;
  /** Units of `FlowCounters` work this incarnation holds (see `reconcileBusy`). */
  held: number;
  seq: number;
  stopped: boolean;
}

const packr = new Packr({ useRecords: false });
/** Unacked bound of the policy's consumer of fetch results. */
const FETCHES_RECEIVER_QUEUE = 256;
const REQUESTS_PER_MESSAGE = 32;
const SCAN_CHUNK = 1024;

/**
 * The crawl policy of one partition: owns the frontier of its hosts and decides what is
 * requested when. State lives in RocksDB (`frontier`, `robots`, `pending`, the outbox and
 * the applied marks); the per-host queues, the recrawl schedule and the in-flight set are
 * an in-memory index of it, rebuilt by `start()` from `frontier`.
 *
 * Flow:
 * - discovered URLs arrive as rows in `pending` (written by the backlinks actor in the same
 *   batch as the backlink) or as seeds; each unknown URL gets a `frontier` row: `queued`
 *   (with a priority, its score estimate x + r from `ranks`, seeds above all),
 *   `out-of-scope` (host not allowed) or nothing (dropped host);
 * - dispatch: for each host with queued URLs, fewer than `maxInFlightPerHost` requests out
 *   and its politeness delay over, the highest-priority URL is checked against the
 *   origin's robots.txt (fetched once a day through the crawler's fetcher, at most
 *   `maxRobotsFetches` at once, cached in `robots`): allowed ones are marked `requested` and sent in `crawl-requests/<p>` through
 *   the outbox (frontier rows and outbox rows in one write batch); disallowed ones become
 *   `blocked` until the robots.txt is fetched again;
 * - feedback: the policy also consumes `fetches/<p>` (its own subscription, with applied
 *   marks): a result frees the host slot, starts its delay (`minDelayMs`, raised by
 *   `Crawl-delay`) and schedules the next crawl of the URL (`recrawlIntervalMs`, or
 *   `goneRecrawlMs` after 404/410, or a doubling retry after a failure);
 * - a timer on `ctx.clock` wakes the policy for the next host delay, due recrawl or
 *   overdue request (no result within `requestTimeoutMs`: counted as a failure).
 *
 * Quiescence: the policy holds one unit of `FlowCounters` work per request out and per
 * robots.txt fetch, and one more while it has queued URLs it will send (budget left), so
 * `WebIndex.quiescence()` waits for every result and for hosts that are only waiting for
 * their delay. Scheduled recrawls and blocked URLs hold nothing: the crawl is quiet when
 * everything reachable was fetched once.
 *
 * The fetch results it consumes are settled in the flow counters by the indexer only.
 */
export function crawlPolicy(env: PartitionEnv, options: CrawlPolicyOptions = {}): Behavior<CrawlPolicyMessage, CrawlPolicyState, CrawlDrain | void> {
  const owner = 'crawl-policy';
  const target = topic(Namespaces.crawlRequests, env.partition);
  const o: ResolvedCrawlPolicyOptions = resolveCrawlPolicyOptions(options);
  return {
    kind: 'crawl-policy',
    async start(ctx) {
      const store = await env.store.acquire();
      let outbox: StreamOutbox | undefined;
      let consumer: Consumer | undefined;
      try {
        outbox = await openPartitionOutbox(env, store, owner);
        consumer = await env.broker.subscribe(topic(Namespaces.fetches, env.partition), { subscription: owner, type: 'failover', receiverQueueSize: FETCHES_RECEIVER_QUEUE, ...ownerPriority(env.fence) });
        const c = consumer;
        const feed = feedDeliveries(c, (d: Deliveries) => ctx.self.tell(d), ctx.fail, { maxCount: 64, maxDelayMs: 2 });
        const state: CrawlPolicyState = {
          store, outbox, consumer: c, feed, marks: partitionMarks(store, owner),
          hosts: new Map(), ready: new Set(), requested: new Map(), due: dueHeap(),
          robots: new Map(), robotsFetching: new Set(), robotsNotStored: new Set(), dropped: new Set(), pendingSeen: -1,
          timer: undefined, held: 0, seq: 0, stopped: false,
        };
        await load(state);
        // Dispatch what was queued before a restart. Not awaited: with a full mailbox the
        // tell waits for room, and start() must return for the mailbox to drain.
        ctx.self.tell({ type: 'poke' }).catch(() => undefined);
        return state;
      } catch (err) {
        await consumer?.close();
        await outbox?.close();
        await env.store.release();
        throw err;
      }
    },
    async receive(state, message, ctx) {
      const now = ctx.clock.now();
      switch (message.type) {
        case 'seed':
          await seed(state, message.urls, now);
          break;
        case 'poke':
        case 'drained':
          break;
        case 'recrawl':
          await recrawl(state, message.urls);
          break;
        case 'drop-host':
          dropHost(state, message.host);
          break;
        case 'deliveries':
          if (message.consumer !== state.consumer) return; // a previous incarnation's: redelivered to this one
          await onResults(state, message, now);
          break;
        case 'shardflow.crawl-policy.robots':
          await onRobots(state, message, now);
          break;
        case 'shardflow.crawl-policy.tick':
          state.timer = undefined;
          await onTick(state, now);
          break;
      }
      await intakePending(state, now);
      await dispatch(state, ctx, now);
      reconcileBusy(state);
      arm(state, ctx, now);
      if (message.type === 'drained') return drain(state);
    },
    async stop(state) {
      state.stopped = true;
      state.timer?.cancel();
      state.timer = undefined;
      state.feed.unsubscribe();
      env.checkpoints?.dropHeld(state.consumer);
      state.held = adjust(state.held, 0);
      await state.consumer.close();
      await state.outbox.close();
      await env.store.release();
    },
  };

  /** Rebuilds the in-memory index from `frontier` and the dropped hosts from `meta`. */
  async function load(state: CrawlPolicyState): Promise<void> {
    for await (const [key] of state.store.iterate(ColumnFamilies.meta, { prefix: DROPPED_HOST_PREFIX, keysOnly: true })) {
      state.dropped.add(key.toString('utf8').slice(DROPPED_HOST_PREFIX.length));
    }
    const requeue = state.store.batch();
    for await (const { keys, values } of state.store.chunks(ColumnFamilies.frontier, { chunkSize: SCAN_CHUNK })) {
      for (let i = 0; i < keys.length; i++) {
        const url = keys[i]!.toString('utf8');
        const entry = packr.unpack(values[i]!) as FrontierEntry;
        const host = safeHost(url);
        if (host === undefined || state.dropped.has(host)) continue;
        switch (entry.state ?? 'requested') {
          case 'queued':
            enqueue(state, host, url, entry.priority ?? 0);
            break;
          case 'requested':
            state.requested.set(url, entry.requestedAt);
            hostState(state, host).inFlight++;
            break;
          case 'fetched': {
            // This run's intervals apply to the pages earlier runs fetched: a run with a
            // shorter --recrawl-hours refetches what is older than it, not only after the
            // interval the fetch was scheduled with (a week by default).
            const wait = entry.status !== undefined ? waitAfter(entry.status, entry.failures ?? 0) : Infinity;
            const fetchedAt = entry.fetchedAt ?? 0;
            // --recrawl: everything fetched before this run is due now.
            const now = o.recrawlFetchedBefore !== undefined && fetchedAt < o.recrawlFetchedBefore ? fetchedAt : Infinity;
            const dueAt = Math.min(entry.dueAt ?? Infinity, fetchedAt + wait, now);
            if (Number.isFinite(dueAt)) {
              if (dueAt !== entry.dueAt) requeue.put(ColumnFamilies.frontier, url, packr.pack({ ...entry, dueAt } satisfies FrontierEntry));
              state.due.push({ at: dueAt, url });
            }
            break;
          }
          case 'blocked':
            if (entry.dueAt !== undefined && Number.isFinite(entry.dueAt)) state.due.push({ at: entry.dueAt, url });
            break;
          case 'out-of-scope':
            if (!o.scope || o.scope.allows(host)) {
              // The scope widened since: crawl it now.
              requeue.put(ColumnFamilies.frontier, url, packr.pack({ ...entry, state: 'queued', reason: undefined } satisfies FrontierEntry));
              enqueue(state, host, url, entry.priority ?? 0);
            }
            break;
        }
      }
    }
    if (requeue.length > 0) await state.store.write(requeue);
  }

  function hostState(state: CrawlPolicyState, host: string): HostState {
    let h = state.hosts.get(host);
    if (!h) state.hosts.set(host, (h = { host, queue: urlHeap(), inFlight: 0, nextAt: 0, crawlDelayMs: 0 }));
    return h;
  }

  function enqueue(state: CrawlPolicyState, host: string, url: string, priority: number): void {
    const h = hostState(state, host);
    h.queue.push({ url, priority, seq: state.seq++ });
    state.ready.add(h);
  }

  /** A new frontier row for `url`, or undefined when its host was dropped. */
  function admit(state: CrawlPolicyState, url: string, priority: number, now: number): FrontierEntry | undefined {
    const host = safeHost(url);
    if (host === undefined || state.dropped.has(host)) return undefined;
    if (o.scope && !o.scope.allows(host)) {
      return { requestedAt: 0, state: 'out-of-scope', discoveredAt: now, reason: `not in scope (${o.scope.description})` };
    }
    enqueue(state, host, url, priority);
    return { requestedAt: 0, state: 'queued', discoveredAt: now, priority };
  }

  async function seed(state: CrawlPolicyState, urls: readonly string[], now: number): Promise<void> {
    const keys = [...new Set(urls)];
    if (keys.length === 0) return;
    const known = await state.store.multiGet(ColumnFamilies.frontier, keys);
    const batch = state.store.batch();
    keys.forEach((url, i) => {
      if (known[i] !== undefined) return;
      const entry = admit(state, url, SEED_PRIORITY, now);
      if (entry) batch.put(ColumnFamilies.frontier, url, packr.pack(entry));
    });
    if (batch.length > 0) await state.store.write(batch);
  }

  /**
   * Moves every row of `pending` into the frontier (unknown URLs) and deletes it, a chunk
   * at a time. Each chunk's scan starts after the previous chunk's last key: started from
   * the first key, it would step over the tombstones of every row deleted so far, and
   * taking in the 200,000 targets of one page cost a quadratic number of steps. Rows written
   * meanwhile before that key are taken in on the next call (every message ends with one).
   */
  async function intakePending(state: CrawlPolicyState, now: number): Promise<void> {
    // Counted before the scan (writes count once complete): a write completed after this
    // read may be missed by the scan, and then the count differs and the next intake scans.
    const seen = state.store.writesTo(ColumnFamilies.pending);
    if (seen === state.pendingSeen) return;
    let after: Buffer | undefined;
    let own = 0;
    for (;;) {
      const keys: Buffer[] = [];
      for await (const [key] of state.store.iterate(ColumnFamilies.pending, { keysOnly: true, chunkSize: SCAN_CHUNK, ...(after ? { gt: after } : {}) })) {
        keys.push(key);
        if (keys.length >= SCAN_CHUNK) break;
      }
      if (keys.length === 0) {
        // Nothing but this scan's own deletes written meanwhile: the same state next time.
        state.pendingSeen = state.store.writesTo(ColumnFamilies.pending) === seen + own ? seen + own : seen;
        return;
      }
      after = keys[keys.length - 1];
      const [known, ranks] = await Promise.all([
        state.store.multiGet(ColumnFamilies.frontier, keys),
        state.store.multiGet(ColumnFamilies.ranks, keys),
      ]);
      const batch = state.store.batch();
      const fresh = new Set<string>();
      keys.forEach((key, i) => {
        batch.delete(ColumnFamilies.pending, key);
        const url = key.toString('utf8');
        if (known[i] !== undefined || fresh.has(url)) return;
        fresh.add(url);
        const entry = admit(state, url, scoreOf(ranks[i]), now);
        if (entry) batch.put(ColumnFamilies.frontier, key, packr.pack(entry));
      });
      await state.store.write(batch);
      own++;
    }
  }

  async function recrawl(state: CrawlPolicyState, urls: readonly string[]): Promise<void> {
    await requeue(state, urls, {
      accept: () => true,
      priorityOf: (score, entry) => Math.max(score, entry.priority ?? 0),
      clearReason: true,
    });
  }

  /**
   * Queues again those of `urls` whose frontier row says fetched (or blocked) and that
   * `accept` takes, on a host not dropped: one multiGet of their rows and one of their
   * ranks, each enqueued on its host with `priorityOf(its score, its row)` and its row
   * rewritten as queued (without `dueAt`, and without `reason` when `clearReason`).
   */
  async function requeue(
    state: CrawlPolicyState,
    urls: readonly string[],
    how: { accept(entry: FrontierEntry, host: string): boolean; priorityOf(score: number, entry: FrontierEntry): number; clearReason: boolean },
  ): Promise<void> {
    const keys = [...new Set(urls)];
    if (keys.length === 0) return;
    const [known, ranks] = await Promise.all([state.store.multiGet(ColumnFamilies.frontier, keys), state.store.multiGet(ColumnFamilies.ranks, keys)]);
    const batch = state.store.batch();
    keys.forEach((url, i) => {
      const v = known[i];
      if (v === undefined) return;
      const entry = packr.unpack(v) as FrontierEntry;
      if (entry.state !== 'fetched' && entry.state !== 'blocked') return;
      const host = safeHost(url);
      if (host === undefined || state.dropped.has(host) || !how.accept(entry, host)) return;
      const priority = how.priorityOf(scoreOf(ranks[i]), entry);
      enqueue(state, host, url, priority);
      const queued: FrontierEntry = { ...entry, state: 'queued', priority, dueAt: undefined, ...(how.clearReason ? { reason: undefined } : {}) };
      batch.put(ColumnFamilies.frontier, url, packr.pack(queued));
    });
    if (batch.length > 0) await state.store.write(batch);
  }

  function dropHost(state: CrawlPolicyState, host: string): void {
    const h = host.toLowerCase();
    state.dropped.add(h);
    const hs = state.hosts.get(h);
    if (hs) {
      state.ready.delete(hs);
      state.hosts.delete(h);
    }
    for (const url of [...state.requested.keys()]) if (safeHost(url) === h) state.requested.delete(url);
  }

  /** Applies fetch results: frees hosts and schedules the next crawl of each URL. */
  async function onResults(state: CrawlPolicyState, d: Deliveries, now: number): Promise<void> {
    const batch = state.store.batch();
    const overlay = new Map<string, FrontierEntry>();
    for (const m of d.messages) {
      // A redelivery is skipped; so is a message of a fenced-off older producer incarnation,
      // which the indexer dead-letters with the reason on its own subscription.
      if ((await state.marks.classify(m.producer, m.sequence)).kind !== 'new') continue;
      let results: readonly FetchResult[] = [];
      try {
        results = fetchCodec.decode(m.payload).results;
      } catch (err) {
        if (!isShardflowError(err)) throw err; // the indexer dead-letters it; nothing to learn here
      }
      for (const r of results) await applyResult(state, batch, overlay, r.url, r.status, r.error, r.fetchedAt, now);
      state.marks.record(batch, m.producer, m.sequence);
    }
    await state.store.write(batch);
    const settle = async () => {
      for (const m of d.messages) await d.consumer.ack(m);
    };
    // With checkpoints, the acks wait for the checkpoint that holds the marks.
    if (env.checkpoints) env.checkpoints.hold(d.consumer, d.messages.length, settle, FETCHES_RECEIVER_QUEUE);
    else await settle();
  }

  /** A fetch's answer that is retried (no answer, 429, 5xx), not recrawled. */
  function isFailure(status: number): boolean {
    return status === 0 || status === 429 || status >= 500;
  }

  /**
   * Milliseconds from a fetch to the next one of its URL: `recrawlIntervalMs`, `goneRecrawlMs`
   * after 404 or 410, a doubling retry delay (at most `recrawlIntervalMs`) after the
   * `failures`-th failure in a row.
   */
  function waitAfter(status: number, failures: number): number {
    if (isFailure(status)) return Math.min(o.retryDelayMs * 2 ** Math.min(Math.max(failures, 1) - 1, 30), o.recrawlIntervalMs);
    return status === 404 || status === 410 ? o.goneRecrawlMs : o.recrawlIntervalMs;
  }

  async function applyResult(
    state: CrawlPolicyState, batch: WriteBatch, overlay: Map<string, FrontierEntry>,
    url: string, status: number, error: string | undefined, fetchedAt: number, now: number,
  ): Promise<void> {
    const host = safeHost(url);
    if (host === undefined) return;
    let entry = overlay.get(url);
    if (!entry) {
      const v = await state.store.get(ColumnFamilies.frontier, url);
      entry = v ? (packr.unpack(v) as FrontierEntry) : { requestedAt: 0, discoveredAt: now };
    }
    const hs = state.hosts.get(host);
    if (state.requested.delete(url) && hs) {
      hs.inFlight = Math.max(0, hs.inFlight - 1);
      hs.nextAt = Math.max(Number.isFinite(hs.nextAt) ? hs.nextAt : 0, now + delayOf(hs));
    }
    const failed = isFailure(status);
    const failures = failed ? (entry.failures ?? 0) + 1 : 0;
    const dueAt = now + waitAfter(status, failures);
    const next: FrontierEntry = {
      ...entry,
      state: 'fetched',
      fetchedAt,
      status,
      fetches: (entry.fetches ?? 0) + 1,
      failures,
      dueAt: Number.isFinite(dueAt) ? dueAt : undefined,
      reason: failed ? error : undefined,
    };
    overlay.set(url, next);
    batch.put(ColumnFamilies.frontier, url, packr.pack(next));
    if (next.dueAt !== undefined && !state.dropped.has(host)) state.due.push({ at: next.dueAt, url });
  }

  /** Requeues due recrawls and fails overdue requests. */
  async function onTick(state: CrawlPolicyState, now: number): Promise<void> {
    const overdue = [...state.requested].filter(([, at]) => at + o.requestTimeoutMs <= now).map(([url]) => url);
    if (overdue.length > 0) {
      const batch = state.store.batch();
      const overlay = new Map<string, FrontierEntry>();
      for (const url of overdue) await applyResult(state, batch, overlay, url, 0, `no result within ${o.requestTimeoutMs} ms`, now, now);
      await state.store.write(batch);
      env.log.warn({ urls: overdue.length, timeoutMs: o.requestTimeoutMs }, 'crawl requests without result: retried later');
    }
    const dueUrls: string[] = [];
    while (state.due.length > 0 && state.due.peek()!.at <= now) dueUrls.push(state.due.pop()!.url);
    if (dueUrls.length === 0) return;
    await requeue(state, dueUrls, {
      // A URL rescheduled since its heap entry was pushed has another `dueAt`: stale entry.
      accept: (entry, host) => entry.dueAt !== undefined && entry.dueAt <= now && !(o.scope && !o.scope.allows(host)),
      priorityOf: (score) => score,
      clearReason: false,
    });
  }

  async function onRobots(state: CrawlPolicyState, message: RobotsFetched, now: number): Promise<void> {
    state.robotsFetching.delete(message.origin);
    state.robotsNotStored.delete(message.origin);
    const f = message.fetch;
    const record: RobotsRecord = { origin: message.origin, fetchedAt: f.fetchedAt, status: f.status, ...(f.body !== undefined ? { body: f.body } : {}), ...(f.error ? { error: f.error } : {}) };
    await state.store.put(ColumnFamilies.robots, message.origin, packr.pack(record));
    cacheRobots(state, record, now, true);
    if (f.status === 0 || f.status >= 500 || f.status === 429) env.log.warn({ origin: message.origin, status: f.status, reason: f.error }, 'robots.txt unreachable: its URLs wait');
  }

  /**
   * Parses and caches a robots.txt record. A `fresh` one (just fetched) stays valid for at
   * least a second even with a zero TTL, so a dispatch never refetches in a loop.
   */
  function cacheRobots(state: CrawlPolicyState, record: RobotsRecord, now: number, fresh: boolean): CachedRobots {
    const rules = robotsRules(record, o.robots?.userAgentToken ?? 'shardflow');
    const ttl = rules.unreachable ? o.robotsRetryMs : o.robotsTtlMs;
    const cached = { rules, expiresAt: fresh ? Math.max(record.fetchedAt + ttl, now + Math.min(ttl, 1000), now + 1) : record.fetchedAt + ttl };
    state.robots.set(record.origin, cached);
    const h = state.hosts.get(safeHost(record.origin) ?? '');
    if (h) h.crawlDelayMs = Math.max(h.crawlDelayMs, Math.min(rules.crawlDelayMs, o.maxCrawlDelayMs));
    return cached;
  }

  /**
   * The rules of `origin` when known and fresh; otherwise starts (or waits for) a fetch of
   * its robots.txt and returns undefined. A cached record in `robots` is used while fresh.
   * At most `maxRobotsFetches` fetches are in flight; another origin waits (undefined) until
   * one ends.
   */
  async function robotsFor(state: CrawlPolicyState, ctx: ActorContext<CrawlPolicyMessage>, origin: string, now: number): Promise<CachedRobots | undefined> {
    if (!o.robots) return { rules: { allows: () => true, crawlDelayMs: 0 }, expiresAt: Infinity };
    const cached = state.robots.get(origin);
    if (cached && cached.expiresAt > now) return cached;
    if (state.robotsFetching.has(origin)) return undefined;
    if (!cached && !state.robotsNotStored.has(origin)) {
      const stored = await state.store.get(ColumnFamilies.robots, origin);
      if (stored) {
        const c = cacheRobots(state, packr.unpack(stored) as RobotsRecord, now, false);
        if (c.expiresAt > now) return c;
      } else {
        state.robotsNotStored.add(origin);
      }
    }
    // At the bound, the origin waits: the end of a fetch in flight dispatches again.
    if (state.robotsFetching.size >= o.maxRobotsFetches) return undefined;
    state.robotsFetching.add(origin);
    const fetcher = o.robots;
    const settle = (fetch: RobotsFetch) => {
      if (state.stopped) return;
      ctx.self.tell({ type: 'shardflow.crawl-policy.robots', origin, fetch }).catch(() => undefined);
    };
    fetcher.fetchRobots(origin, now).then(settle, (err: unknown) => settle({ url: `${origin}/robots.txt`, status: 0, fetchedAt: now, error: (err as Error).message }));
    return undefined;
  }

  /** Sends crawl requests for every host whose turn it is. */
  async function dispatch(state: CrawlPolicyState, ctx: ActorContext<CrawlPolicyMessage>, now: number): Promise<void> {
    const batch = state.store.batch();
    const urls: string[] = [];
    for (const h of [...state.ready]) {
      while (h.queue.length > 0 && h.inFlight < o.maxInFlightPerHost && h.nextAt <= now) {
        if (o.budget && !o.budget.available) break;
        const next = h.queue.pop()!;
        const origin = originOf(next.url);
        const robots = origin ? await robotsFor(state, ctx, origin, now) : undefined;
        if (!robots) {
          h.queue.push(next); // wait for the robots.txt (the fetch's message comes back here)
          break;
        }
        if (!robots.rules.allows(next.url)) {
          const v = await state.store.get(ColumnFamilies.frontier, next.url);
          const entry = v ? (packr.unpack(v) as FrontierEntry) : { requestedAt: 0 };
          const dueAt = robots.expiresAt;
          batch.put(ColumnFamilies.frontier, next.url, packr.pack({ ...entry, state: 'blocked', reason: robots.rules.unreachable ?? 'disallowed by robots.txt', dueAt } satisfies FrontierEntry));
          state.due.push({ at: dueAt, url: next.url });
          continue;
        }
        if (o.budget && !o.budget.take()) {
          h.queue.push(next);
          break;
        }
        const v = await state.store.get(ColumnFamilies.frontier, next.url);
        const entry = v ? (packr.unpack(v) as FrontierEntry) : { requestedAt: 0, discoveredAt: now };
        batch.put(ColumnFamilies.frontier, next.url, packr.pack({ ...entry, state: 'requested', requestedAt: now } satisfies FrontierEntry));
        state.requested.set(next.url, now);
        urls.push(next.url);
        h.inFlight++;
        if (o.maxInFlightPerHost > 1) h.nextAt = now + delayOf(h);
        else h.nextAt = Infinity; // the result sets it: delay counts from the end of the fetch
      }
      if (h.queue.length === 0) state.ready.delete(h);
    }
    for (let i = 0; i < urls.length; i += REQUESTS_PER_MESSAGE) {
      await state.outbox.enqueue(batch, target, crawlRequestCodec.encode({ type: 'crawl-requests', urls: urls.slice(i, i + REQUESTS_PER_MESSAGE) }));
    }
    if (batch.length === 0) return;
    await state.store.write(batch);
    await state.outbox.publish();
  }

  function drain(state: CrawlPolicyState): CrawlDrain {
    const readyHosts = !o.budget || o.budget.available ? state.ready.size : 0;
    return { drained: state.requested.size === 0 && state.robotsFetching.size === 0 && readyHosts === 0, requested: state.requested.size, robots: state.robotsFetching.size, readyHosts };
  }

  function delayOf(h: HostState): number {
    return Math.max(o.minDelayMs, h.crawlDelayMs);
  }

  /**
   * Holds exactly as many units of flow-counter work as the policy has outstanding: one per
   * request out, one per robots.txt fetch, and one while queued URLs wait to be sent.
   */
  function reconcileBusy(state: CrawlPolicyState): void {
    const sendable = state.ready.size > 0 && (!o.budget || o.budget.available);
    state.held = adjust(state.held, state.requested.size + state.robotsFetching.size + (sendable ? 1 : 0));
  }

  function adjust(held: number, want: number): number {
    for (; held < want; held++) env.counters.begin();
    for (; held > want; held--) env.counters.done();
    return held;
  }

  /** Sets the timer to the next moment something can happen (a host's delay, a due recrawl, an overdue request). */
  function arm(state: CrawlPolicyState, ctx: ActorContext<CrawlPolicyMessage>, now: number): void {
    let at = Infinity;
    if (!o.budget || o.budget.available) {
      for (const h of state.ready) if (h.inFlight < o.maxInFlightPerHost && h.nextAt > now) at = Math.min(at, h.nextAt);
    }
    const due = state.due.peek();
    if (due) at = Math.min(at, due.at);
    for (const requestedAt of state.requested.values()) at = Math.min(at, requestedAt + o.requestTimeoutMs);
    if (!Number.isFinite(at)) return;
    if (state.timer && state.timer.at <= at) return;
    state.timer?.cancel();
    const cancel = ctx.clock.setTimeout(() => {
      if (!state.stopped) ctx.self.tell({ type: 'shardflow.crawl-policy.tick' }).catch(() => undefined);
    }, Math.max(0, at - now));
    state.timer = { at, cancel };
  }
}

function safeHost(url: string): string | undefined {
  try {
    return hostOf(url);
  } catch {
    return undefined;
  }
}

function originOf(url: string): string | undefined {
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}
