import { Heap } from 'heap-js';

/** A URL to look at again at time `at` (ms since the epoch). */
export interface DueUrl {
  readonly at: number;
  readonly url: string;
}

/**
 * The crawl policy's recrawl and retry schedule: a min-heap (heap-js) of (time, URL),
 * earliest first. Entries are not removed when a URL is rescheduled; the caller checks a
 * popped entry against the frontier row (its `dueAt`) and skips stale ones.
 */
export function dueHeap(): Heap<DueUrl> {
  return new Heap<DueUrl>((a, b) => a.at - b.at);
}
