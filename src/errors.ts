/**
 * Every error shardflow throws, in one place (after undici's `lib/core/errors.js`).
 *
 * Match on `code` (stable `SF_ERR_*` strings), not on class identity: `isShardflowError`
 * works across duplicate copies of the package because the brand is a `Symbol.for` key.
 * docs/errors.md lists the codes.
 */

const kShardflowError = Symbol.for('shardflow.error');

/** Base class: `name`, a default message and a stable `code`. `cause` is kept when given. */
export class ShardflowError extends Error {
  readonly code: string = 'SF_ERR_UNKNOWN';
  readonly [kShardflowError] = true;
  constructor(message?: string, options?: { cause?: unknown }) {
    super(message ?? 'shardflow error', options);
    this.name = 'ShardflowError';
  }
}

/** True for any shardflow error, even one made by another copy of this package. */
export function isShardflowError(err: unknown): err is ShardflowError {
  return typeof err === 'object' && err !== null && (err as Record<symbol, unknown>)[kShardflowError] === true;
}

/**
 * Marks `err` terminal: what failed will not come back by asking again (the topology or
 * actor system stopped, a partition no owner answered for in time), so retry loops
 * (`askWithRetry`, the metric coordinator's asks, the query service's reads) throw it at
 * once. The mark is a property (`terminal: true`) so that it survives a copy of this package.
 * @returns `err`, marked
 */
export function terminalError<E extends Error>(err: E): E & { readonly terminal: true } {
  return Object.assign(err, { terminal: true as const });
}

/** Whether `err` was marked by {@link terminalError}: retry loops throw it at once. */
export function isTerminalError(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { terminal?: unknown }).terminal === true;
}

/**
 * `err` or the first of its causes (`Error.cause`, up to 8 deep) that `test` accepts, else
 * undefined: a restart-intensity error wraps the failure that repeated, a job error the
 * failure that stopped it.
 */
export function findCause(err: unknown, test: (e: { readonly code?: unknown; readonly status?: unknown; readonly message?: unknown }) => boolean): Error | undefined {
  let e: unknown = err;
  for (let depth = 0; depth < 8 && e !== null && typeof e === 'object'; depth++) {
    if (test(e as { code?: unknown })) return e as Error;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** An argument or option is outside its documented domain. */
export class InvalidArgumentError extends ShardflowError {
  override readonly code: string = 'SF_ERR_INVALID_ARGUMENT';
  constructor(message = 'invalid argument', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'InvalidArgumentError';
  }
}

/** A payload is larger than the broker's `maxPayloadBytes`; nothing was sent. */
export class PayloadTooLargeError extends InvalidArgumentError {
  override readonly code: string = 'SF_ERR_PAYLOAD_TOO_LARGE';
  constructor(message: string, readonly bytes: number, readonly limit: number, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PayloadTooLargeError';
  }
}

/**
 * An external producer with source offsets (`ExternalProducerOptions.offsets`) refuses sends
 * once one of its sends failed: the broker may lack that offset, and a later offset applied
 * would make the partition skip it when the input is sent again. Open a new producer and send
 * again from the lowest offset not known to be sent (every offset below it resolved), or from
 * the start. The message names the refused offset and the failed one; the failed send's error
 * is `cause`.
 */
export class ProducerFailedError extends ShardflowError {
  override readonly code: string = 'SF_ERR_PRODUCER_FAILED';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ProducerFailedError';
  }
}

/** A URL did not parse or has a scheme the crawler does not fetch. */
export class InvalidUrlError extends ShardflowError {
  override readonly code: string = 'SF_ERR_INVALID_URL';
  constructor(readonly url: string, reason = 'invalid URL', options?: { cause?: unknown }) {
    super(`${reason}: ${JSON.stringify(url)}`, options);
    this.name = 'InvalidUrlError';
  }
}

/** A message on the broker could not be decoded by the codec. */
export class UndecodableMessageError extends ShardflowError {
  override readonly code: string = 'SF_ERR_UNDECODABLE_MESSAGE';
  constructor(message = 'message does not decode', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'UndecodableMessageError';
  }
}

/**
 * A data dir cannot be used as asked: another partition count or scheme than it was written
 * with, a partition store missing or damaged, a record that does not parse; or a cluster's
 * web index, whose data dirs are its workers', holds another graph (`rankOnCluster`). Nothing
 * was changed; the message says what to do. The CLI exits 1.
 */
export class DataDirError extends ShardflowError {
  override readonly code: string = 'SF_ERR_DATA_DIR';
  constructor(message = 'the data dir cannot be used', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DataDirError';
  }
}

/**
 * A job made no progress for its stall limit and cannot go on (what it waits for can no
 * longer come: broker data lost, a partition gone). The message says what it waited for.
 */
export class JobStalledError extends ShardflowError {
  override readonly code: string = 'SF_ERR_JOB_STALLED';
  constructor(message = 'the job made no progress', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'JobStalledError';
  }
}

/** A job was stopped by a signal (SIGINT, SIGTERM) and stopped cleanly; the same command goes on with it. */
export class JobInterruptedError extends ShardflowError {
  override readonly code: string = 'SF_ERR_INTERRUPTED';
  constructor(readonly signal: string, message = `stopped by ${signal}`, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'JobInterruptedError';
  }
}

/** The broker connection is lost; supervisors back off and restart on this one. */
export class BrokerDisconnectedError extends ShardflowError {
  override readonly code: string = 'SF_ERR_BROKER_DISCONNECTED';
  constructor(message = 'broker disconnected', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BrokerDisconnectedError';
  }
}

/**
 * The broker no longer has the data of a live subscription: the Redis stream or consumer
 * group vanished under a consumer (NOGROUP: the key was deleted, or Redis restarted without
 * persistence), or the Pulsar topic or subscription was deleted. Messages that were in flight
 * (delivered and not acked, or not yet delivered) are gone and will not be redelivered.
 * Not a `BrokerDisconnectedError`: backing off and resubscribing would start a fresh, empty
 * subscription and hide the loss. `topic` is the topic name (`namespace/partition`),
 * `subscription` the subscription's name.
 */
export class BrokerDataLostError extends ShardflowError {
  override readonly code: string = 'SF_ERR_BROKER_DATA_LOST';
  constructor(readonly topic: string, readonly subscription: string, detail: string, options?: { cause?: unknown }) {
    super(`broker lost the data of subscription ${subscription} on topic ${topic}: ${detail}`, options);
    this.name = 'BrokerDataLostError';
  }
}

/** An operation used a producer, consumer or broker after `close()`. */
export class BrokerClosedError extends ShardflowError {
  override readonly code: string = 'SF_ERR_BROKER_CLOSED';
  constructor(message = 'broker or client is closed', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BrokerClosedError';
  }
}

/** `ask` got no reply in time. */
export class AskTimeoutError extends ShardflowError {
  override readonly code: string = 'SF_ERR_ASK_TIMEOUT';
  constructor(message = 'ask timed out', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'AskTimeoutError';
  }
}

/** A message was sent to an actor that has stopped. */
export class ActorStoppedError extends ShardflowError {
  override readonly code: string = 'SF_ERR_ACTOR_STOPPED';
  constructor(message = 'actor is stopped', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ActorStoppedError';
  }
}

/** A fault injected on purpose (`--chaos`, tests): supervisors restart on it. */
export class InjectedFaultError extends ShardflowError {
  override readonly code: string = 'SF_ERR_INJECTED_FAULT';
  constructor(message = 'injected fault', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'InjectedFaultError';
  }
}

/** A bounded mailbox is full and its overflow policy is `'fail'` (or `'drop-newest'` for an `ask`). */
export class MailboxFullError extends ShardflowError {
  override readonly code: string = 'SF_ERR_MAILBOX_FULL';
  constructor(message = 'mailbox is full', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'MailboxFullError';
  }
}

/**
 * A child failed more often than its supervisor strategy's restart limit allows
 * (`maxRestarts` within `withinMs`); the failure is escalated with this error, the last
 * failure as `cause`.
 */
export class RestartIntensityExceededError extends ShardflowError {
  override readonly code: string = 'SF_ERR_RESTART_INTENSITY';
  constructor(readonly path: string, message = 'restart intensity exceeded', options?: { cause?: unknown }) {
    super(`${path}: ${message}`, options);
    this.name = 'RestartIntensityExceededError';
  }
}

// ---- Storage (src/storage, native/): raised by the native addon, which is handed these
// classes at load time (src/storage/native.ts). `status` is the RocksDB status text when
// RocksDB reported the failure.

/** Options of the storage errors: `status` carries RocksDB's status text. */
export interface StoreErrorOptions {
  cause?: unknown;
  status?: string;
}

/** An operation used a store, iterator or snapshot after `close()` / `release()`. */
export class StoreClosedError extends ShardflowError {
  override readonly code: string = 'SF_ERR_STORE_CLOSED';
  readonly status: string | undefined;
  constructor(message = 'store is closed', options?: StoreErrorOptions) {
    super(message, options);
    this.name = 'StoreClosedError';
    this.status = options?.status;
  }
}

/** RocksDB found corrupt data (checksum mismatch, bad file); supervisors stop on this one. */
export class StoreCorruptionError extends ShardflowError {
  override readonly code: string = 'SF_ERR_STORE_CORRUPTION';
  readonly status: string | undefined;
  constructor(message = 'store data is corrupt', options?: StoreErrorOptions) {
    super(message, options);
    this.name = 'StoreCorruptionError';
    this.status = options?.status;
  }
}

/** A filesystem or RocksDB I/O failure (disk full, missing directory, permission). */
export class StoreIOError extends ShardflowError {
  override readonly code: string = 'SF_ERR_STORE_IO';
  readonly status: string | undefined;
  constructor(message = 'store I/O error', options?: StoreErrorOptions) {
    super(message, options);
    this.name = 'StoreIOError';
    this.status = options?.status;
  }
}

/** The store is busy: its LOCK is held by another handle, or RocksDB said busy / try again. */
export class StoreBusyError extends ShardflowError {
  override readonly code: string = 'SF_ERR_STORE_BUSY';
  readonly status: string | undefined;
  constructor(message = 'store is busy', options?: StoreErrorOptions) {
    super(message, options);
    this.name = 'StoreBusyError';
    this.status = options?.status;
  }
}

/** A column family names a merge operator the native addon does not have; the store does not open. */
export class UnknownMergeOperatorError extends ShardflowError {
  override readonly code: string = 'SF_ERR_STORE_UNKNOWN_MERGE_OPERATOR';
  readonly status: string | undefined;
  constructor(message = 'unknown merge operator', options?: StoreErrorOptions) {
    super(message, options);
    this.name = 'UnknownMergeOperatorError';
    this.status = options?.status;
  }
}

/** A column family was created with another merge operator than the one it is opened with. */
export class MergeOperatorMismatchError extends ShardflowError {
  override readonly code: string = 'SF_ERR_STORE_MERGE_OPERATOR_MISMATCH';
  readonly status: string | undefined;
  constructor(message = 'merge operator differs from the one the column family was created with', options?: StoreErrorOptions) {
    super(message, options);
    this.name = 'MergeOperatorMismatchError';
    this.status = options?.status;
  }
}

// ---- Cluster (src/cluster): ownership of a partition by one worker at a time.

/**
 * A partition's owner no longer holds its lease safely (it ran out, another worker took it,
 * or its store records a newer owner epoch): nothing more is committed or published under
 * the old ownership. Partition supervisors stop on this one (never restart). `epoch` is the
 * fenced-off owner's epoch, `newer` the one that replaced it when known.
 */
export class FencedError extends ShardflowError {
  override readonly code: string = 'SF_ERR_FENCED';
  constructor(message = 'fenced off: the partition lease is no longer held', readonly epoch?: number, readonly newer?: number, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'FencedError';
  }
}

/**
 * The error a partition's `ask` threw on the worker that owns it, re-created at the cluster
 * client that asked (`ClusterClient.ask`): `message` is the remote message, `code` the remote
 * error's code when it had a string one (`SF_ERR_INVALID_ARGUMENT`, ...; else
 * `SF_ERR_REMOTE_ASK`), `remoteName` its class name (`TypeError`, `InvalidArgumentError`), and
 * `stage`, `partition`, `worker` say who answered.
 */
export class RemoteAskError extends ShardflowError {
  override readonly code: string;
  constructor(
    message: string,
    readonly remoteName: string,
    remoteCode: string | undefined,
    readonly stage: string,
    readonly partition: number,
    readonly worker: string,
  ) {
    super(message);
    this.name = 'RemoteAskError';
    this.code = remoteCode ?? 'SF_ERR_REMOTE_ASK';
  }
}

// ---- Checkpoints (src/checkpoint): copies of stores in a checkpoint store.

/**
 * A checkpoint cannot be used: its manifest does not parse, or one of its files is missing,
 * of another size or another SHA-256 than the manifest records. Nothing was restored (a
 * restore writes into a temporary folder, removed on this error). `key` is the checkpoint
 * key (partition id), `sequence` the checkpoint's sequence number, `file` the damaged file's
 * name when one is to blame.
 */
export class CheckpointDamagedError extends ShardflowError {
  override readonly code: string = 'SF_ERR_CHECKPOINT_DAMAGED';
  constructor(message: string, readonly key: string, readonly sequence: number, readonly file?: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CheckpointDamagedError';
  }
}

/** A restore asked for a key with no checkpoint, or for a sequence number that is not (or no longer) there. */
export class CheckpointNotFoundError extends ShardflowError {
  override readonly code: string = 'SF_ERR_CHECKPOINT_NOT_FOUND';
  constructor(message: string, readonly key: string, readonly sequence?: number, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CheckpointNotFoundError';
  }
}

/**
 * An S3 request of a checkpoint store failed after its retries (src/checkpoint/s3Http.ts):
 * the server refused it (`status`, S3's error code in `s3Code`: `NoSuchBucket`,
 * `AccessDenied`, `SlowDown`, ...), no answer came (`status` 0, the network error's code in
 * `s3Code`, e.g. `ECONNREFUSED` or `UND_ERR_HEADERS_TIMEOUT`, the error as `cause`), or it
 * could not be signed (`status` 0, `s3Code` `SigningFailed`: no credentials, or their
 * provider failed; not retried). `method` and `key` (`s3://BUCKET/KEY`) name the request,
 * the message the server's URL too.
 */
export class S3RequestError extends ShardflowError {
  override readonly code: string = 'SF_ERR_S3_REQUEST';
  constructor(readonly method: string, readonly key: string, readonly status: number, readonly s3Code: string, detail: string, options?: { cause?: unknown }) {
    super(`S3 ${method} ${key}: ${status === 0 ? 'no answer' : `HTTP ${status}`}, ${s3Code}: ${detail}`, options);
    this.name = 'S3RequestError';
  }
}
