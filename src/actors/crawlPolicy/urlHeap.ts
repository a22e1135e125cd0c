import { Heap } from 'heap-js';

/** One queued URL: higher `priority` first, then lower `seq` (first come, first served). */
export interface QueuedUrl {
  readonly url: string;
  readonly priority: number;
  readonly seq: number;
}

/**
 * The queued URLs of one host (a heap-js binary heap): by priority, then by arrival (`seq`),
 * so that equal priorities are crawled breadth-first in discovery order. `push` and `pop`
 * are O(log n).
 */
export function urlHeap(): Heap<QueuedUrl> {
  return new Heap<QueuedUrl>((a, b) => b.priority - a.priority || a.seq - b.seq);
}
