import { hostOf, keyPartitioner, type PartitionId } from '../../index.js';

/**
 * The web index's placement: every URL of a host on the same partition, in every process
 * (the framework's FNV-1a key partitioner over `hostOf(url)`: the lower-cased host, with its
 * port when not default).
 *
 * Two schemes (say, crawl and index) agree exactly when their `describe()` values are equal;
 * it is stored in each partition's `meta` column family and in the data dir's record, so a
 * store opened under another scheme is refused.
 */
export interface Partitioner {
  /** Number of partitions, >= 1. */
  readonly partitions: number;
  /** Partition that owns `host` (already lower-cased by `hostOf`). */
  forHost(host: string): PartitionId;
  /** Partition that owns the URL's host. @throws InvalidUrlError when no host can be found. */
  forUrl(url: string): PartitionId;
  /** A stable description, `fnv1a-host/<partitions>` (e.g. `fnv1a-host/16`). */
  describe(): string;
}

/** The FNV-1a host partitioner. @throws RangeError when `partitions` is not an integer >= 1. */
export function hostPartitioner(partitions: number): Partitioner {
  const byKey = keyPartitioner(partitions);
  // The last host's partition: `hostOf` returns the same string for a run of URLs of one
  // host, so the comparison is mostly by identity and the hash is skipped.
  let lastHost: string | undefined;
  let lastPartition = byKey.forKey('');
  const forHost = (host: string): PartitionId => {
    if (host !== lastHost) {
      lastPartition = byKey.forKey(host);
      lastHost = host;
    }
    return lastPartition;
  };
  return Object.freeze({
    partitions,
    forHost,
    forUrl: (url: string) => forHost(hostOf(url)),
    describe: () => `fnv1a-host/${partitions}`,
  });
}
