import { InvalidArgumentError } from '../errors.js';
import { ClusterKeys, DEFAULT_CLUSTER_PREFIX } from './keys.js';
import { liveMembers } from './membership.js';
import { connectCoordination } from './redisConnection.js';

/**
 * Removes every Redis key of cluster `clusterName` (topology, assignment, epochs, leases,
 * membership; keys.ts lists them) once no worker is live: for a cluster that is retired, or
 * a laptop run that is over. The partition stores and the broker scope stay (remove those with
 * the data dir and `deleteBrokerScope(clusterBrokerIdentity(...))`). Reads with SCAN.
 * @returns how many keys were deleted
 * @throws InvalidArgumentError naming the live workers when some are; BrokerDisconnectedError when Redis does not answer
 */
export async function retireCluster(options: { readonly cluster: string; readonly clusterName: string; readonly keyPrefix?: string }): Promise<number> {
  const keys = new ClusterKeys(options.clusterName, options.keyPrefix ?? DEFAULT_CLUSTER_PREFIX);
  const redis = await connectCoordination(options.cluster, 5000);
  try {
    const live = await liveMembers(redis, keys);
    if (live.length > 0) throw new InvalidArgumentError(`cluster ${options.clusterName} still has live workers (${live.map((m) => m.id).join(', ')}): stop them first`);
    let deleted = 0;
    let cursor = '0';
    do {
      const [next, found] = await redis.scan(cursor, 'MATCH', `${keys.base}*`, 'COUNT', 1000);
      cursor = next;
      if (found.length > 0) deleted += await redis.del(...found);
    } while (cursor !== '0');
    return deleted;
  } finally {
    redis.disconnect();
  }
}
