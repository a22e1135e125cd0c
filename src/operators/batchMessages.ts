import { asyncScheduler, bufferTime, filter, type OperatorFunction, type SchedulerLike } from 'rxjs';

/** Options of `batchMessages`. */
export interface BatchMessagesConfig {
  /** Most values in one batch; a full batch is emitted at once. Default 256. */
  readonly maxCount?: number;
  /** Longest time a value waits for its batch to fill, in ms. Default 5. */
  readonly maxDelayMs?: number;
  /** Scheduler for the delay (a `TestScheduler` in marble tests). Default `asyncScheduler`. */
  readonly scheduler?: SchedulerLike;
}

/**
 * Groups values into arrays of at most `maxCount`, emitting a batch when it is full or
 * `maxDelayMs` after the previous emission point, whichever comes first; empty windows
 * emit nothing. Batching turns a stream of broker messages into RocksDB write batches.
 *
 * ```
 * source:  -a-b-c-d------e-|        maxCount 3, maxDelayMs 5 frames
 * result:  -----(abc)-d---e-(|)     a full batch leaves at once; d waits for the window
 * ```
 *
 * Errors and completion pass through; a partial batch is emitted before completion.
 * Built on RxJS `bufferTime(maxDelayMs, null, maxCount)`, without its empty arrays.
 * @see bufferTime
 */
export function batchMessages<T>(config: BatchMessagesConfig = {}): OperatorFunction<T, T[]> {
  const maxCount = config.maxCount ?? 256;
  const maxDelayMs = config.maxDelayMs ?? 5;
  if (!(maxCount >= 1)) throw new RangeError(`maxCount must be >= 1, got ${maxCount}`);
  if (!(maxDelayMs >= 0)) throw new RangeError(`maxDelayMs must be >= 0, got ${maxDelayMs}`);
  return (source) =>
    source.pipe(
      bufferTime(maxDelayMs, null, maxCount, config.scheduler ?? asyncScheduler),
      filter((batch) => batch.length > 0),
    );
}
