import type { Logger } from 'pino';
import type { Subscription } from 'rxjs';
import { JobStalledError } from '../index.js';
import type { StopReport, WebIndex } from '../topology/webIndex.js';
import type { RepairReport } from '../topology/repair.js';
import type { DrainReport } from '../topology/resume.js';

/** Options of `JobWatchdog`. */
export interface WatchdogOptions {
  readonly log: Logger;
  /** What the job is doing now (`loading`, `crawling`, `metric round 12`), for the reports. */
  readonly phase: () => string;
  /** Without progress for this long, say what the job waits for (log and `onStall`). Default 30 s. */
  readonly warnAfterMs?: number;
  /** Without progress for this long, fail the job with JobStalledError. Default 600 s. */
  readonly failAfterMs?: number;
  /** How often progress is looked at. Default 1 s. */
  readonly checkEveryMs?: number;
  /** Called with each stall report (the CLI prints it on its progress line). */
  readonly onStall?: (report: string) => void;
}

/**
 * Watches a running job so that it never hangs in silence. Progress is any change of the
 * flow counters (a message sent or settled, local work begun or done). Without progress
 * for `warnAfterMs` it reports what the job waits for: the phase, the messages in flight
 * per namespace and per partition (from the per-topic counts), and the last actor failure;
 * again every `warnAfterMs`. It fails the job (`failed` rejects with JobStalledError and
 * that report) when waiting cannot end: after `failAfterMs` without progress, at once when
 * an actor failed because the broker lost its data (code `SF_ERR_BROKER_DATA_LOST`: the
 * messages the job waits for are gone; a re-run repairs from the stores), or when a failure
 * escalated to the root (the actor system stopped).
 */
export class JobWatchdog {
  readonly failed: Promise<never>;
  #fail!: (err: JobStalledError) => void;
  #timer: NodeJS.Timeout | undefined;
  #events: Subscription | undefined;
  #lastFailure: string | undefined;
  #brokerDataLost = false;
  #epoch = -1;
  #since = Date.now();
  #warned = 0;

  constructor(
    readonly index: WebIndex,
    readonly options: WatchdogOptions,
  ) {
    this.failed = new Promise<never>((_, reject) => (this.#fail = reject));
    this.failed.catch(() => undefined); // observed by whoever races it
  }

  /** Starts watching. @returns this */
  start(): this {
    const warnAfter = this.options.warnAfterMs ?? 30_000;
    const failAfter = this.options.failAfterMs ?? 600_000;
    this.#events = this.index.system.events$.subscribe((event) => {
      if (event.type !== '@shardflow.failed' && event.type !== '@shardflow.escalated') return;
      const reason = event.reason as { code?: unknown; message?: unknown } | undefined;
      const text = `${event.path}: ${causeChain(reason)}`;
      this.#lastFailure = text;
      if (reason?.code === 'SF_ERR_BROKER_DATA_LOST') {
        this.#brokerDataLost = true;
        this.#fail(new JobStalledError(`the broker lost messages this run waits for (${text}); run the same command again: the data dir is repaired from its stores`));
      } else if (event.type === '@shardflow.escalated' && event.path.split('/').filter(Boolean).length <= 1) {
        this.#fail(new JobStalledError(`a failure escalated to the root and the actor system stopped (${text})`, { cause: reason }));
      }
    });
    this.#timer = setInterval(() => {
      const epoch = this.index.counters.epoch();
      const now = Date.now();
      if (epoch !== this.#epoch) {
        this.#epoch = epoch;
        this.#since = now;
        this.#warned = 0;
        return;
      }
      const idle = now - this.#since;
      if (idle >= failAfter) {
        this.#fail(new JobStalledError(`no progress for ${Math.round(idle / 1000)} s: ${this.report()}`));
      } else if (idle >= warnAfter * (this.#warned + 1)) {
        this.#warned++;
        const report = this.report();
        this.options.log.warn({ idleSeconds: Math.round(idle / 1000) }, `no progress: ${report}`);
        this.options.onStall?.(`no progress for ${Math.round(idle / 1000)} s: ${report}`);
      }
    }, this.options.checkEveryMs ?? 1000);
    this.#timer.unref();
    return this;
  }

  /**
   * What the job waits for, in one line: the phase, messages in flight per namespace with
   * the partitions they go to, and the last actor failure.
   */
  report(): string {
    const waiting: string[] = [];
    const byNamespace = new Map<string, { count: number; partitions: string[] }>();
    for (const t of this.index.topicFlow.topics()) {
      const open = t.sent - t.settled;
      if (open <= 0) continue;
      let entry = byNamespace.get(t.namespace);
      if (!entry) byNamespace.set(t.namespace, (entry = { count: 0, partitions: [] }));
      entry.count += open;
      entry.partitions.push(String(t.partition));
    }
    for (const [ns, e] of byNamespace) waiting.push(`${e.count} ${ns} messages to partitions ${e.partitions.sort((a, b) => Number(a) - Number(b)).join(',')}`);
    if (waiting.length === 0 && !this.index.counters.balanced()) waiting.push('local work in progress (crawl requests out, outboxes draining)');
    const failure = this.#lastFailure ? `; last failure ${this.#lastFailure}` : '';
    return `${this.options.phase()}, waiting for ${waiting.length > 0 ? waiting.join('; ') : 'nothing in flight'}${failure}`;
  }

  /** True once an actor failed because the broker lost its data. */
  get brokerDataLost(): boolean {
    return this.#brokerDataLost;
  }

  /** Stops watching (the `failed` promise then never settles). */
  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#events?.unsubscribe();
  }
}

export { aborted, raceStops } from '../topology/abortable.js';

/** A job's stop: the web index's report, and whether the broker lost data during the run. */
export interface JobStopReport extends StopReport {
  readonly brokerDataLost: boolean;
}

/**
 * What every job (`rankGraph`, `crawlGraph`, `crawlSites`) takes about its life on a data
 * dir: recovery (repair or resume), a clean stop, the stop report and the stall watchdog.
 */
export interface JobLifecycleOptions {
  /** Repair the data dir first (its last run did not stop quiet); see `WebIndexOptions.repair`. */
  readonly repair?: boolean;
  readonly onRepaired?: (report: RepairReport) => void;
  /** Resume the last run's work on the same durable broker scope; see `WebIndexOptions.resume`. */
  readonly resume?: boolean;
  readonly onResumed?: (report: DrainReport) => void;
  /** Aborting stops the job cleanly (stop consuming, commit what was folded, close stores); the job then rejects with the signal's reason. */
  readonly signal?: AbortSignal;
  /** Called with the web index's stop report, however the job ends. */
  readonly onStopped?: (report: JobStopReport) => void;
  /** The stall watchdog's limits and reports (see JobWatchdog). */
  readonly stall?: Pick<WatchdogOptions, 'warnAfterMs' | 'failAfterMs' | 'onStall'>;
}

/** The recovery options and the stop signal of `options`, as `startWebIndex` takes them. */
export function startOptions(options: JobLifecycleOptions): Pick<JobLifecycleOptions, 'repair' | 'onRepaired' | 'resume' | 'onResumed' | 'signal'> {
  return {
    ...(options.repair ? { repair: true } : {}),
    ...(options.onRepaired ? { onRepaired: options.onRepaired } : {}),
    ...(options.resume ? { resume: true } : {}),
    ...(options.onResumed ? { onResumed: options.onResumed } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  };
}

/**
 * An error's message followed by its causes' (`: `-joined, each once: a restart-intensity
 * error's own message does not hold its cause's), at most 2,000 characters: the first
 * failure is what to fix ("more than 3 restarts" alone said nothing).
 */
function causeChain(reason: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = reason, depth = 0; e !== undefined && e !== null && depth < 8; depth++) {
    const message = String((e as { message?: unknown }).message ?? e);
    if (!parts.some((p) => p.includes(message))) parts.push(message);
    e = (e as { cause?: unknown }).cause;
  }
  const text = parts.join(': ');
  return text.length > 2000 ? `${text.slice(0, 2000)}...` : text;
}
