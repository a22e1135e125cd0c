import { InvalidArgumentError, isShardflowError } from '../errors.js';
import type { CheckpointStore } from '../checkpoint/checkpointStore.js';
import type { Logger } from '../runtime/actor/logger.js';

/**
 * A worker's check, before it joins, that its checkpoint store answers it: one listing of
 * `key` (a partition's checkpoint key; for S3 one `ListObjectsV2` request). A store that
 * refuses (denied or unknown credentials, a missing bucket: any answer but 408, 429 or 5xx)
 * refuses the worker, so that it never takes partitions it cannot restore or checkpoint
 * (found by a new user: a worker with a wrong secret key joined and took 5 partitions, each
 * then refused with the 403). A store that does not answer (`transient` says so) is only
 * logged: the worker joins, and its partitions wait for the store as they do in an outage.
 * @param transient the reason when `err` says the store did not answer, else undefined
 * @throws InvalidArgumentError naming the store and its refusal (the store's error as `cause`)
 */
export async function checkCheckpointAccess(store: CheckpointStore, key: string, transient: (err: unknown) => string | undefined, logger: Logger, worker: string): Promise<void> {
  try {
    await store.list(key);
  } catch (err) {
    const where = store.location ?? store.url;
    const waiting = transient(err);
    if (waiting !== undefined) {
      logger.warn({ worker, err }, `the checkpoint store ${where} does not answer (${waiting}): joining anyway; partitions wait for it before they start`);
      return;
    }
    const detail = isShardflowError(err) || err instanceof Error ? err.message : String(err);
    throw new InvalidArgumentError(
      `the checkpoint store ${where} refuses this worker: ${detail}. Give it the credentials and bucket the cluster's other workers use (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL; docs/checkpoints.md)`,
      { cause: err },
    );
  }
}
