import type { Redis } from 'ioredis';
import type { CheckpointRegistry } from '../runtime/stream/stageCheckpoints.js';
import type { ClusterKeys } from './keys.js';
import { askCoordination } from './redisConnection.js';
import { runClusterScript } from './scripts.js';

/**
 * A cluster's `CheckpointRegistry`: the hash `<p>checkpointed` in the cluster's Redis maps
 * each checkpoint key (`<cluster>/<stage>/p<i>`) to the sequence of its latest durable
 * checkpoint, raised by a script that never lowers it. Workers record each put there before
 * they release what it covers, and a restore refuses a state older than the record, so that a
 * newest manifest removed from the checkpoint store (by hand, an S3 lifecycle rule, a restore
 * of the bucket from a backup) is refused instead of restored around. `retireCluster` removes
 * it with the cluster's other keys.
 */
export class RedisCheckpointRegistry implements CheckpointRegistry {
  constructor(readonly redis: Redis, readonly keys: ClusterKeys) {}

  /** @throws BrokerDisconnectedError when the cluster's Redis does not answer (the caller tries again); its reply errors as they are */
  async recordDurable(key: string, sequence: number): Promise<void> {
    await askCoordination(`record checkpoint ${sequence} of ${key}`, () => runClusterScript(this.redis, 'raiseField', [this.keys.checkpointed], [key, sequence]));
  }

  /** @throws BrokerDisconnectedError when the cluster's Redis does not answer (a worker tries the start again at its next heartbeat); its reply errors as they are */
  async latestDurable(key: string): Promise<number | undefined> {
    const value = await askCoordination(`read the latest durable checkpoint of ${key}`, () => this.redis.hget(this.keys.checkpointed, key));
    return value === null ? undefined : Number(value);
  }

}
