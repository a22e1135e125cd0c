import { InvalidArgumentError } from '../errors.js';
import type { CheckpointStore } from '../checkpoint/checkpointStore.js';
import { stageCheckpointKey } from '../runtime/stream/stageCheckpoints.js';
import { ClusterKeys, DEFAULT_CLUSTER_PREFIX } from './keys.js';
import { liveMembers, readClusterTopology } from './membership.js';
import { connectCoordination } from './redisConnection.js';
import { allUnits } from './units.js';

/** How long a retire's marker lives, ms: past it, a retire that died no longer holds joins off. */
const RETIRING_MS = 60_000;

/** Options of {@link retireCluster}. */
export interface RetireClusterOptions {
  /** Redis URL of the cluster's coordination. */
  readonly cluster: string;
  readonly clusterName: string;
  readonly keyPrefix?: string;
  /**
   * The cluster's checkpoint store: every checkpoint of its partitions (`<clusterName>/<stage>/p<i>`,
   * the stages its Redis records) is removed too, so that workers started again under the name
   * begin afresh instead of restoring the old state.
   */
  readonly checkpoints?: CheckpointStore;
}

/** What {@link retireCluster} removed. */
export interface RetireClusterReport {
  /** Redis keys deleted. */
  readonly keys: number;
  /** Checkpoints removed (0 without `checkpoints`). */
  readonly checkpoints: number;
}

/**
 * Retires cluster `clusterName` once no worker is live (workers are refused to join while it
 * runs: a marker key, `ClusterKeys.retiring`, that their join script checks): removes every
 * checkpoint of its partitions from `options.checkpoints` when given (before the Redis keys,
 * which name its stages and its checkpoint store: refused when the store is not the one the
 * cluster recorded), then every Redis key of the cluster (topology, assignment, epochs, leases,
 * membership, the graph or other claims, the checkpoint records; keys.ts lists them), read with SCAN.
 * The workers' data dirs and the broker scope stay: remove those with the data dirs and
 * `deleteBrokerScope(clusterBrokerIdentity(...))`. Workers started again under the name with
 * old data dirs open those stores (their owner epochs newer than the new counters: the
 * counters are raised past them), so beginning afresh needs new data dirs too.
 * @throws InvalidArgumentError naming the live workers when some are, another checkpoint store
 *   than the cluster's, or another retire running; BrokerDisconnectedError
 *   when Redis does not answer; the checkpoint store's errors (nothing deleted from Redis then)
 */
export async function retireCluster(options: RetireClusterOptions): Promise<RetireClusterReport> {
  const keys = new ClusterKeys(options.clusterName, options.keyPrefix ?? DEFAULT_CLUSTER_PREFIX);
  const redis = await connectCoordination(options.cluster, 5000);
  try {
    // The marker first: a worker joins in a script that refuses while it is set
    // (`joinCluster`), so one that joined before is seen below and one that did not is
    // refused (found by a new user: a worker starting while retire ran kept running in a
    // cluster whose records were gone).
    if ((await redis.set(keys.retiring, String(process.pid), 'PX', RETIRING_MS, 'NX')) === null) {
      throw new InvalidArgumentError(`cluster ${options.clusterName} is being retired by another process already`);
    }
    try {
      const live = await liveMembers(redis, keys);
      if (live.length > 0) throw new InvalidArgumentError(`cluster ${options.clusterName} still has live workers (${live.map((m) => m.id).join(', ')}): stop them first`);
      let checkpoints = 0;
      if (options.checkpoints) {
        // Only the store the cluster ran with (found by a new user: a mistyped URL removed
        // nothing, exit 0, and the next workers restored the old state).
        const recorded = await redis.get(keys.checkpoints);
        const given = options.checkpoints.location ?? options.checkpoints.url;
        if (recorded !== given) {
          throw new InvalidArgumentError(
            recorded === null
              ? `cluster ${options.clusterName} records no checkpoint store (its workers ran without one, or it was retired): nothing to remove from ${given}`
              : `cluster ${options.clusterName} ran with checkpoint store ${recorded}, not ${given}: give that one (with the same AWS_ENDPOINT_URL)`,
          );
        }
        for (const unit of allUnits((await readClusterTopology(redis, keys)) ?? [])) {
          checkpoints += await options.checkpoints.remove(stageCheckpointKey(options.clusterName, unit.stage, unit.partition));
        }
      }
      let deleted = 0;
      let cursor = '0';
      do {
        const [next, found] = await redis.scan(cursor, 'MATCH', `${keys.base}*`, 'COUNT', 1000);
        cursor = next;
        const others = found.filter((k) => k !== keys.retiring);
        if (others.length > 0) deleted += await redis.del(...others);
      } while (cursor !== '0');
      return { keys: deleted, checkpoints };
    } finally {
      await redis.del(keys.retiring);
    }
  } finally {
    redis.disconnect();
  }
}
