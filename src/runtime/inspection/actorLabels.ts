/** Prometheus labels of one actor; `partition` only when the actor lives under a partition. */
export interface ActorLabels {
  /** Actor path, e.g. `/partitions/p3/indexer`. */
  readonly path: string;
  /** The behaviour's kind, e.g. `indexer`, `partition`, `supervisor`. */
  readonly kind: string;
  /** Partition number as a decimal string (`'3'`), when the path names one. */
  readonly partition?: string;
}

/** `partitions/p3` or `partitions/p-3` as one segment pair: the partition convention of `startWebIndex`. */
const PARTITION_SEGMENT = /(?:^|\/)partitions\/p-?(\d+)(?:\/|$)/;

/**
 * The labels of the actor at `path` whose behaviour kind is `kind`. The partition is read from
 * the first `partitions/p<N>` segment pair, so the partition actor and its children share it:
 *
 * ```
 * /partitions/p3/indexer  indexer    -> { partition: '3', kind: 'indexer' }
 * /partitions/p3          partition  -> { partition: '3', kind: 'partition' }
 * /crawlers/crawler-0     crawler    -> { kind: 'crawler' }   (no partition label)
 * ```
 *
 * Leading zeros are dropped (`p03` gives `'3'`) so that label values match `topicName`'s
 * partition numbers.
 */
export function actorLabels(path: string, kind: string): ActorLabels {
  const match = PARTITION_SEGMENT.exec(path);
  return match === null ? { path, kind } : { path, kind, partition: String(Number(match[1])) };
}
