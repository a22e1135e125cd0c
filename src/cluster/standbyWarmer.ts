import type { Redis } from 'ioredis';
import type { CheckpointStore } from '../checkpoint/checkpointStore.js';
import type { CheckpointFileCache } from '../checkpoint/fileCache.js';
import type { Logger } from '../runtime/actor/logger.js';
import { stageCheckpointKey } from '../runtime/stream/stageCheckpoints.js';
import type { ClusterKeys } from './keys.js';
import { parseStandbys } from './leader.js';
import { parseUnitKey } from './units.js';

/** One warm pass's work on one unit (a `warmed` worker event when it fetched anything). */
export interface StandbyWarm {
  readonly unit: string;
  /** The checkpoint warmed (the unit's newest). */
  readonly sequence: number;
  /** Contents (whole files, WAL chunks) and bytes of it now in the cache. */
  readonly files: number;
  readonly bytes: number;
  /** Of them, fetched by this pass. */
  readonly fetchedFiles: number;
  readonly fetchedBytes: number;
  /** Wall-clock seconds of the unit's warm. */
  readonly seconds: number;
}

/** What a {@link StandbyWarmer} works with. */
export interface StandbyWarmerOptions {
  readonly redis: Redis;
  readonly keys: ClusterKeys;
  /** This worker's member id. */
  readonly memberId: string;
  readonly store: CheckpointStore;
  /** First segment of the checkpoint keys (the cluster name). */
  readonly keyPrefix: string;
  readonly cache: CheckpointFileCache;
  /** The units the worker's application has (`<stage>/<partition>`). */
  readonly units: ReadonlySet<string>;
  /** Whether the worker holds the unit's lease now, and whether its store is still opening (a restore may be taking the cache's files). */
  readonly held: (unit: string) => 'opening' | 'held' | undefined;
  /** Least ms from the start of one pass to the start of the next. */
  readonly periodMs: number;
  readonly logger: Logger;
  readonly onWarm: (warm: StandbyWarm) => void;
}

/**
 * A worker's warm standbys (docs/cluster.md, "Warm standbys"): every `periodMs` it reads the
 * units the leader made it a standby of (the `standbys` hash) and fetches into the worker's
 * `CheckpointFileCache` what their newest checkpoints hold and the cache lacks
 * (`CheckpointStore.warm`); then it removes from the cache what no such checkpoint names (and
 * keeps what a unit this worker is opening was warmed with, for its restore). A crash move to
 * this worker then fetches only what the checkpoints made since its last pass added (Kafka
 * Streams' standby replicas, KIP-441's warm-up: a fail-over replays only the tail).
 * A pass that fails on a unit logs it and keeps the cache as it was; the next pass tries again.
 */
export class StandbyWarmer {
  #running: Promise<void> | undefined;
  #lastStart = -Infinity;
  #stopped = false;
  /** Per unit, the contents its last warm left in the cache. */
  readonly #contents = new Map<string, ReadonlySet<string>>();

  constructor(readonly options: StandbyWarmerOptions) {}

  /** Starts a pass when the last one ended and `periodMs` passed since it started. */
  poke(): void {
    if (this.#stopped || this.#running || Date.now() - this.#lastStart < this.options.periodMs) return;
    this.#lastStart = Date.now();
    this.#running = this.pass().finally(() => {
      this.#running = undefined;
    });
  }

  /** One pass (see the class). Never rejects. */
  async pass(): Promise<void> {
    const o = this.options;
    let mine: string[];
    try {
      const standbys = parseStandbys(await o.redis.hgetall(o.keys.standbys));
      mine = [...standbys].filter(([u, ids]) => ids.includes(o.memberId) && o.units.has(u) && o.held(u) === undefined).map(([u]) => u);
    } catch (err) {
      o.logger.warn({ worker: o.memberId, err }, 'warm standbys: reading the standbys failed; trying again at the next pass');
      return;
    }
    let failed = false;
    for (const unit of mine) {
      if (this.#stopped) return;
      const { stage, partition } = parseUnitKey(unit);
      try {
        const r = await o.store.warm(stageCheckpointKey(o.keyPrefix, stage, partition), o.cache);
        if (!r) continue;
        this.#contents.set(unit, r.contents);
        if (r.fetchedFiles > 0) {
          o.onWarm({ unit, sequence: r.manifest.sequence, files: r.files, bytes: r.bytes, fetchedFiles: r.fetchedFiles, fetchedBytes: r.fetchedBytes, seconds: r.seconds });
        }
      } catch (err) {
        failed = true;
        o.logger.warn({ worker: o.memberId, unit, err }, 'warm standbys: warming the unit failed; trying again at the next pass');
      }
    }
    if (failed || this.#stopped) return;
    const keep = new Set<string>();
    for (const [unit, contents] of this.#contents) {
      if (mine.includes(unit) || o.held(unit) === 'opening') for (const c of contents) keep.add(c);
      else this.#contents.delete(unit);
    }
    try {
      await o.cache.retain(keep);
    } catch (err) {
      o.logger.warn({ worker: o.memberId, err }, 'warm standbys: removing what the cache no longer needs failed; trying again at the next pass');
    }
  }

  /** Stops passes; resolves when the one under way has ended. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#running;
  }
}
