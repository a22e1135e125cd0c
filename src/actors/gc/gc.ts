import { Packr } from 'msgpackr';
import type { Store, WriteBatch } from '../../storage/index.js';
import { decodeFloat64s, encodeFloat64s, encodeInt64, hostOf, InvalidArgumentError, type ActorContext, type ActorRef, type Behavior, type Cancel, type StreamOutbox } from '../../index.js';
import type { LinkOp } from '../messages.js';
import type { CrawlPolicyMessage } from '../crawlPolicy/crawlPolicy.js';
import { DROPPED_HOST_PREFIX } from '../crawlPolicy/crawlPolicy.js';
import { linkWeight } from '../indexer/linkValue.js';
import { enqueueContributions } from '../metrics/contributions.js';
import { enqueueLinkOps } from '../partition/linkOps.js';
import { isScoredPage, teleportOf, undampedLinkValue } from '../partition/redirects.js';
import { openPartitionOutbox } from '../partition/streams.js';
import type { PartitionEnv } from '../partition/env.js';
import { ColumnFamilies, Counters, linkPrefix, splitLinkKey, type GcRecord, type PageRecord } from '../partition/schema.js';
import { gcLogKey } from './gcLogKey.js';

/** Options of the garbage collector. Durations in ms of the system clock. */
export interface GcOptions {
  /** A live page whose last fetch (`fetchedAt`) is older than this is removed. Default 30 days. */
  readonly maxAgeMs?: number;
  /** A page tombstone (`deleted`) older than this is erased with its rank row. Default 30 days. */
  readonly tombstoneRetentionMs?: number;
  /** Time between two automatic sweeps; Infinity: only on request. Default 1 hour. */
  readonly intervalMs?: number;
  /** Damping factor d (for the metric corrections). */
  readonly damping: number;
  /** The crawl policy of the partition, told about dropped hosts. */
  readonly crawlPolicy?: ActorRef<CrawlPolicyMessage, unknown>;
  /** Compact `ranks`, `robots` and `gcLog` after each sweep. Default true. */
  readonly compact?: boolean;
}

/** Messages of the garbage collector. */
export type GcMessage =
  /**
   * Runs a sweep now; replies `GcSweepReport`. `cutoff` (ms since the epoch) overrides
   * `now - maxAgeMs`: pages last fetched before it are removed.
   */
  | { readonly type: 'sweep'; readonly cutoff?: number }
  /** Removes every key of `host` (lower-case, `:port` when not default); replies `DropHostReport`. */
  | { readonly type: 'drop-host'; readonly host: string }
  | { readonly type: 'shardflow.gc.tick' };

/** What one sweep did. */
export interface GcSweepReport {
  /** Page records looked at. */
  readonly scanned: number;
  /** Live pages removed (not fetched since the cutoff). */
  readonly removed: number;
  /** Tombstones erased. */
  readonly erased: number;
  /** Link remove operations sent. */
  readonly linkRemovals: number;
  readonly cutoff: number;
  /** Column families compacted after the sweep. */
  readonly compacted: readonly string[];
}

/** What dropping a host did. */
export interface DropHostReport {
  readonly host: string;
  /** Live pages removed. */
  readonly pages: number;
  /** Outlinks removed (each sent as a link remove operation when its target is on another host). */
  readonly outlinks: number;
  /** Backlinks of the host's pages removed here. */
  readonly backlinks: number;
  /** Frontier entries removed. */
  readonly frontier: number;
}

type GcReply = GcSweepReport | DropHostReport | void;

interface GcState {
  readonly store: Store;
  readonly outbox: StreamOutbox;
  timer: Cancel | undefined;
  stopped: boolean;
}

const packr = new Packr({ useRecords: false });
const PAGES_PER_BATCH = 256;
const DAY = 24 * 3600 * 1000;
const DROPPING_PREFIX = 'dropping-host\u0000';

/**
 * The garbage collector of one partition: a supervised child of the partition actor that
 * sweeps on a `ctx.clock` timer (every `intervalMs`) and on request.
 *
 * A sweep removes every live page whose last fetch is older than `maxAgeMs`, that is a
 * page the crawl no longer visits (its host left the scope, robots.txt now disallows it,
 * its fetches stopped): like the indexer's deletion of a page gone twice, its outlinks are
 * deleted and sent as link remove operations to the partitions of their targets, the
 * metric is corrected (d x_p w_pq / W_p taken back from every target q, the teleport
 * 1 - d taken back from p), the counters are updated, and the record becomes a tombstone
 * (`deleted`). Every removal is recorded in `gcLog` (kept 90 days by its TTL compaction
 * filter). Tombstones older than `tombstoneRetentionMs` are then erased with their rank
 * row. Work is done in write batches of 256 pages, each under the partition's graph lock
 * (so no indexer update or metric push sees a page half removed), with its link operations
 * and contributions in the same batch through the outbox (owner `gc`).
 *
 * After a sweep the GC compacts `ranks`, `robots` and `gcLog`: `ranks` takes a float64 add
 * merge operand per push and per contribution, and every read of a rank (the metric's
 * traversal, the query API's scores of backlink sources) folds the operands written since
 * the last compaction (measured: scores of 1,500 backlink sources on 16 partitions, 45 ms
 * after a 5,000-page convergence, 6 ms after compaction); `robots` and `gcLog` drop their
 * expired records through their TTL compaction filters.
 *
 * Dropping a host removes every key under its prefixes (`http://host/`, `https://host/`)
 * from `pages`, `outlinks`, `backlinks`, `ranks`, `frontier` and `pending`, and its cached
 * robots.txt; sends link remove operations for its outlinks to other hosts, and the
 * metric corrections for them; records the host in `meta` so the crawl policy never
 * requests it again (and tells the policy at once). A drop interrupted by a crash is
 * finished when the GC starts again.
 */
export function gc(env: PartitionEnv, options: GcOptions): Behavior<GcMessage, GcState, GcReply> {
  const owner = 'gc';
  const maxAgeMs = options.maxAgeMs ?? 30 * DAY;
  const tombstoneRetentionMs = options.tombstoneRetentionMs ?? 30 * DAY;
  const intervalMs = options.intervalMs ?? 3600 * 1000;
  const d = options.damping;
  for (const [name, v] of [['maxAgeMs', maxAgeMs], ['tombstoneRetentionMs', tombstoneRetentionMs]] as const) {
    if (!(v >= 0)) throw new InvalidArgumentError(`${name} must be >= 0, got ${v}`);
  }
  if (!(intervalMs > 0)) throw new InvalidArgumentError(`intervalMs must be > 0 (Infinity: no automatic sweeps), got ${intervalMs}`);

  return {
    kind: 'gc',
    async start(ctx) {
      const store = await env.store.acquire();
      try {
        const outbox = await openPartitionOutbox(env, store, owner);
        const state: GcState = { store, outbox, timer: undefined, stopped: false };
        for await (const [key] of store.iterate(ColumnFamilies.meta, { prefix: DROPPING_PREFIX, keysOnly: true })) {
          const host = key.toString('utf8').slice(DROPPING_PREFIX.length);
          env.log.warn({ host }, 'finishing a host drop interrupted by a restart');
          await dropHost(state, host, ctx.clock.now());
        }
        schedule(state, ctx);
        return state;
      } catch (err) {
        await env.store.release();
        throw err;
      }
    },
    async receive(state, message, ctx) {
      const now = ctx.clock.now();
      switch (message.type) {
        case 'sweep':
          return sweep(state, message.cutoff ?? now - maxAgeMs, now);
        case 'drop-host':
          return dropHost(state, message.host, now);
        case 'shardflow.gc.tick': {
          state.timer = undefined;
          const report = await sweep(state, now - maxAgeMs, now);
          if (report.removed + report.erased > 0) env.log.info({ ...report }, 'gc sweep');
          schedule(state, ctx);
          return undefined;
        }
      }
    },
    async stop(state) {
      state.stopped = true;
      state.timer?.();
      await state.outbox.close();
      await env.store.release();
    },
  };

  function schedule(state: GcState, ctx: ActorContext<GcMessage>): void {
    if (!Number.isFinite(intervalMs) || state.stopped) return;
    state.timer = ctx.clock.setTimeout(() => {
      if (!state.stopped) ctx.self.tell({ type: 'shardflow.gc.tick' }).catch(() => undefined);
    }, intervalMs);
  }

  async function sweep(state: GcState, cutoff: number, now: number): Promise<GcSweepReport> {
    const { store } = state;
    let scanned = 0;
    let removed = 0;
    let erased = 0;
    let linkRemovals = 0;
    const eraseBefore = now - tombstoneRetentionMs;
    // Collect candidates from a snapshot-free scan, then re-check each under the lock.
    const candidates: string[] = [];
    for await (const { keys, values } of store.chunks(ColumnFamilies.pages, { chunkSize: 2048 })) {
      for (let i = 0; i < keys.length; i++) {
        scanned++;
        const record = packr.unpack(values[i]!) as PageRecord;
        if (record.deleted ? record.fetchedAt < eraseBefore : record.fetchedAt < cutoff) candidates.push(keys[i]!.toString('utf8'));
      }
    }
    for (let i = 0; i < candidates.length; i += PAGES_PER_BATCH) {
      const chunk = candidates.slice(i, i + PAGES_PER_BATCH);
      await env.graphLock.runExclusive(async () => {
        const batch = store.batch();
        const ops: LinkOp[] = [];
        const corrections = new Map<string, number>();
        const records = await store.multiGet(ColumnFamilies.pages, chunk);
        for (let k = 0; k < chunk.length; k++) {
          const v = records[k];
          if (!v) continue;
          const url = chunk[k]!;
          const record = packr.unpack(v) as PageRecord;
          if (record.deleted) {
            if (!(record.fetchedAt < eraseBefore)) continue; // fetched again meanwhile
            batch.delete(ColumnFamilies.pages, url);
            batch.delete(ColumnFamilies.ranks, url);
            env.adjacency.ranksChanged();
            erased++;
            continue;
          }
          if (!(record.fetchedAt < cutoff)) continue; // fetched again meanwhile
          const n = await removeOutlinks(store, batch, url, ops, corrections, () => true);
          batch.put(ColumnFamilies.pages, url, packr.pack({ ...record, outlinkCount: 0, deleted: true } satisfies PageRecord));
          // Its teleport goes (none for an alias), and it leaves the page counter if it was in it.
          if (isScoredPage(record)) batch.merge(ColumnFamilies.counters, Counters.pages, encodeInt64(-1));
          batch.merge(ColumnFamilies.ranks, url, encodeFloat64s(0, -teleportOf(record, 1 - d)));
          env.adjacency.ranksChanged();
          if (n > 0) batch.merge(ColumnFamilies.counters, Counters.outlinks, encodeInt64(-n));
          const log: GcRecord = { url, removedAt: now, reason: 'not-seen', lastFetchedAt: record.fetchedAt, outlinks: n };
          batch.put(ColumnFamilies.gcLog, gcLogKey(now, url), packr.pack(log));
          env.adjacency.invalidate(url);
          removed++;
          linkRemovals += n;
        }
        await enqueueLinkOps(state.outbox, batch, env.partitioner, ops);
        await enqueueContributions(state.outbox, batch, env.partitioner, 0, corrections);
        if (batch.length > 0) await store.write(batch);
        await state.outbox.publish();
      });
    }
    const compacted = options.compact === false ? [] : [ColumnFamilies.ranks, ColumnFamilies.robots, ColumnFamilies.gcLog];
    for (const cf of compacted) await store.compactRange(cf);
    return { scanned, removed, erased, linkRemovals, cutoff, compacted };
  }

  /**
   * Deletes the outlinks of `url` into `batch`, adds their remove operations (for targets
   * that `sendRemove` accepts) and the metric corrections of losing them.
   * @returns the number of outlinks deleted
   */
  async function removeOutlinks(
    store: Store, batch: WriteBatch, url: string, ops: LinkOp[], corrections: Map<string, number>, sendRemove: (target: string) => boolean,
  ): Promise<number> {
    const targets: string[] = [];
    const weights: number[] = [];
    let undamped = false;
    for await (const [key, value] of store.iterate(ColumnFamilies.outlinks, { prefix: linkPrefix(url) })) {
      targets.push(splitLinkKey(key)[1]);
      weights.push(linkWeight(value));
      if (targets.length === 1) undamped = undampedLinkValue(value);
      batch.delete(ColumnFamilies.outlinks, key);
    }
    if (targets.length === 0) return 0;
    const ranks = await store.get(ColumnFamilies.ranks, url);
    const x = ranks ? decodeFloat64s(ranks)[0] ?? 0 : 0;
    let total = 0;
    for (const w of weights) total += w;
    const dp = targets.length === 1 && undamped ? 1 : d; // a redirect passed its rank on undamped
    targets.forEach((target, i) => {
      if (!sendRemove(target)) return;
      ops.push({ op: 'remove', source: url, target });
      // The page's share of past pushes to `target` goes back: d x_p w_pq / W_p (docs/ARCHITECTURE.md, "The metric").
      if (x !== 0 && total > 0) corrections.set(target, (corrections.get(target) ?? 0) - (dp * x * weights[i]!) / total);
    });
    return targets.length;
  }

  async function dropHost(state: GcState, rawHost: string, now: number): Promise<DropHostReport> {
    const host = rawHost.trim().toLowerCase();
    if (host === '' || /[/?#@\s]/.test(host)) throw new InvalidArgumentError(`not a host: ${JSON.stringify(rawHost)}`);
    if (env.partitioner.forHost(host) !== env.partition) throw new InvalidArgumentError(`host ${host} belongs to partition ${env.partitioner.forHost(host)}, not ${env.partition}`);
    const { store } = state;
    const mark = store.batch();
    mark.put(ColumnFamilies.meta, `${DROPPING_PREFIX}${host}`, encodeInt64(now));
    mark.put(ColumnFamilies.meta, `${DROPPED_HOST_PREFIX}${host}`, encodeInt64(now));
    await store.write(mark);
    await options.crawlPolicy?.tell({ type: 'drop-host', host }).catch(() => undefined);
    const prefixes = [`http://${host}/`, `https://${host}/`];
    const inHost = (url: string) => {
      try {
        return hostOf(url) === host;
      } catch {
        return false;
      }
    };
    let pages = 0;
    let outlinks = 0;
    let backlinks = 0;
    let frontier = 0;
    for (const prefix of prefixes) {
      // Pages, a chunk at a time under the graph lock: outlinks, corrections, counters, log.
      for (;;) {
        const chunk: Array<[string, PageRecord]> = [];
        for await (const [key, value] of store.iterate(ColumnFamilies.pages, { prefix, chunkSize: PAGES_PER_BATCH })) {
          chunk.push([key.toString('utf8'), packr.unpack(value) as PageRecord]);
          if (chunk.length >= PAGES_PER_BATCH) break;
        }
        if (chunk.length === 0) break;
        await env.graphLock.runExclusive(async () => {
          const batch = store.batch();
          const ops: LinkOp[] = [];
          const corrections = new Map<string, number>();
          let live = 0;
          let links = 0;
          for (const [url, record] of chunk) {
            const n = await removeOutlinks(store, batch, url, ops, corrections, (t) => !inHost(t));
            links += n;
            batch.delete(ColumnFamilies.pages, url);
            batch.delete(ColumnFamilies.ranks, url);
            env.adjacency.ranksChanged();
            env.adjacency.invalidate(url);
            if (isScoredPage(record)) live++;
            if (!record.deleted) {
              const log: GcRecord = { url, removedAt: now, reason: 'host-dropped', lastFetchedAt: record.fetchedAt, outlinks: n };
              batch.put(ColumnFamilies.gcLog, gcLogKey(now, url), packr.pack(log));
            }
          }
          for (const t of [...corrections.keys()]) if (inHost(t)) corrections.delete(t);
          if (live > 0) batch.merge(ColumnFamilies.counters, Counters.pages, encodeInt64(-live));
          if (links > 0) batch.merge(ColumnFamilies.counters, Counters.outlinks, encodeInt64(-links));
          await enqueueLinkOps(state.outbox, batch, env.partitioner, ops);
          await enqueueContributions(state.outbox, batch, env.partitioner, 0, corrections);
          await store.write(batch);
          await state.outbox.publish();
          pages += live;
          outlinks += links;
        });
      }
      // Outlinks of URLs without a page record (none normally), backlinks, the rest.
      const end = prefixEnd(prefix);
      const rest = store.batch();
      frontier += await countKeys(store, ColumnFamilies.frontier, prefix);
      for (const cf of [ColumnFamilies.frontier, ColumnFamilies.pending]) rest.deleteRange(cf, prefix, end);
      rest.delete(ColumnFamilies.robots, prefix.slice(0, -1));
      await env.graphLock.runExclusive(async () => {
        // `ranks`, `outlinks` and `backlinks` use memtable insert hints (no range deletes):
        // their keys go one by one, read under the graph lock like the range they replace
        // (the backlinks deleted are the ones counted).
        let nBacklinks = 0;
        for (const cf of [ColumnFamilies.outlinks, ColumnFamilies.backlinks, ColumnFamilies.ranks]) {
          for await (const { keys } of store.chunks(cf, { prefix, keysOnly: true, chunkSize: 4096 })) {
            for (const key of keys) rest.delete(cf, key);
            if (cf === ColumnFamilies.backlinks) nBacklinks += keys.length;
          }
        }
        backlinks += nBacklinks;
        if (nBacklinks > 0) rest.merge(ColumnFamilies.counters, Counters.backlinks, encodeInt64(-nBacklinks));
        env.adjacency.ranksChanged(); // the ranks of the host's URLs go
        return store.write(rest);
      });
    }
    await store.delete(ColumnFamilies.meta, `${DROPPING_PREFIX}${host}`);
    const report: DropHostReport = { host, pages, outlinks, backlinks, frontier };
    env.log.info({ ...report }, 'host dropped');
    return report;
  }
}

async function countKeys(store: Store, cf: string, prefix: string): Promise<number> {
  let n = 0;
  for await (const { keys } of store.chunks(cf, { prefix, keysOnly: true, chunkSize: 4096 })) n += keys.length;
  return n;
}

/** The smallest key greater than every key starting with `prefix` (prefix with its last byte + 1). */
function prefixEnd(prefix: string): Buffer {
  const b = Buffer.from(prefix, 'utf8');
  const end = Buffer.from(b);
  end[end.length - 1] = end[end.length - 1]! + 1;
  return end;
}
