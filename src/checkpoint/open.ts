import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { InvalidArgumentError } from '../errors.js';
import type { CheckpointManifestHold, CheckpointStore } from './checkpointStore.js';
import { DirectoryObjects } from './directoryObjects.js';
import { IncrementalCheckpointStore } from './incremental.js';
import type { S3Connection } from './s3Http.js';
import { S3Objects, s3ConnectionFromEnv } from './s3Objects.js';

export interface OpenCheckpointStoreOptions {
  /**
   * Where an `s3://` store reads its endpoint, region and credentials (`AWS_ENDPOINT_URL`,
   * `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, ...). Default: `process.env`.
   */
  readonly env?: NodeJS.ProcessEnv;
  /** S3 connection settings laid over those of `env` (another endpoint or region, credentials or their provider, attempts, connections). */
  readonly s3?: S3Connection;
  /**
   * A test hook: one put holds its manifest (`CheckpointManifestHold`). Default: parsed from
   * `SHARDFLOW_CHECKPOINT_HOLD_MANIFEST=<afterPuts>:<ms>` in `env`; none when unset.
   */
  readonly holdManifest?: CheckpointManifestHold;
}

/** The variable of the manifest-hold test hook (`CheckpointManifestHold`). */
export const CHECKPOINT_HOLD_MANIFEST_ENV = 'SHARDFLOW_CHECKPOINT_HOLD_MANIFEST';

/**
 * Parses `<afterPuts>:<ms>` (two positive integers) of {@link CHECKPOINT_HOLD_MANIFEST_ENV}.
 * @returns undefined when the variable is unset or empty
 * @throws InvalidArgumentError for any other form
 */
export function manifestHoldFromEnv(env: NodeJS.ProcessEnv): CheckpointManifestHold | undefined {
  const v = env[CHECKPOINT_HOLD_MANIFEST_ENV];
  if (v === undefined || v === '') return undefined;
  const m = /^(\d+):(\d+)$/.exec(v);
  const afterPuts = Number(m?.[1]);
  const ms = Number(m?.[2]);
  if (!m || afterPuts < 1 || ms < 1) throw new InvalidArgumentError(`${CHECKPOINT_HOLD_MANIFEST_ENV} is <afterPuts>:<ms> (two positive integers, e.g. 3:2000), got ${JSON.stringify(v)}`);
  return { afterPuts, ms };
}

/**
 * Opens the checkpoint store at `url`:
 * - `file:///DIR` (absolute): a directory, created on first write; on a filesystem every
 *   machine mounts, or on one machine;
 * - `s3://BUCKET/PREFIX` (PREFIX optional): S3 or an S3-compatible server; the bucket must
 *   exist; endpoint and credentials from the AWS environment variables (see `env`), with
 *   path-style requests when an endpoint is given.
 *
 * Both are incremental (only files not stored yet are written) and show a checkpoint only
 * once complete; docs/checkpoints.md. Nothing is contacted until the first call.
 *
 * @example
 * const checkpoints = openCheckpointStore('s3://shardflow/cluster-a');
 * await checkpoints.put('p3', store, 12, { metadata: positions });
 * await checkpoints.restore('p3', '/data/p3');
 * @throws InvalidArgumentError for another scheme, a relative or malformed URL, an s3 URL
 *   without a bucket name or with a port, user, query, fragment, malformed %-escape or an
 *   empty, `.` or `..` prefix segment, a malformed `SHARDFLOW_CHECKPOINT_HOLD_MANIFEST`. (A
 *   bucket that does not exist is found on the first request: `S3RequestError` NoSuchBucket.)
 */
export function openCheckpointStore(url: string, options: OpenCheckpointStoreOptions = {}): CheckpointStore {
  const hold = options.holdManifest ?? manifestHoldFromEnv(options.env ?? process.env);
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new InvalidArgumentError(`a checkpoint store URL is file:///DIR or s3://BUCKET/PREFIX, got ${JSON.stringify(url)}`);
  }
  if (u.protocol === 'file:') {
    if (u.host !== '' && u.host !== 'localhost') throw new InvalidArgumentError(`file URL ${url} names host ${u.host}: use file:///DIR (a path every machine mounts)`);
    const dir = fileURLToPath(u);
    if (!path.isAbsolute(dir)) throw new InvalidArgumentError(`file URL ${url} is not an absolute path`);
    return new IncrementalCheckpointStore(new DirectoryObjects(path.resolve(dir)), hold);
  }
  if (u.protocol === 's3:') {
    const bucket = u.hostname;
    if (!bucket) throw new InvalidArgumentError(`s3 URL ${url} names no bucket: s3://BUCKET/PREFIX`);
    // Nothing of the URL may be dropped in silence: the endpoint and credentials come from
    // the environment (or the `s3` option), never from the URL.
    if (u.port || u.username || u.password || u.search || u.hash || url.includes('#') || url.includes('?')) {
      throw new InvalidArgumentError(`s3 URL ${url} has a port, user, query or fragment: a checkpoint store URL is s3://BUCKET/PREFIX (the endpoint and credentials come from AWS_ENDPOINT_URL and AWS_ACCESS_KEY_ID, or the s3 option)`);
    }
    let prefix: string;
    try {
      prefix = decodeURIComponent(u.pathname).replace(/^\/+|\/+$/g, '');
    } catch {
      throw new InvalidArgumentError(`s3 URL ${url} has a malformed %-escape in its prefix (write a % as %25)`);
    }
    // The URL parser resolves '.' and '..' (a prefix outside the one written), and S3-compatible
    // servers on a filesystem merge '//' (a key listed under another name): refused.
    const raw = url.slice(url.indexOf(bucket) + bucket.length).replace(/^\/+|\/+$/g, '');
    const oddSegment = (path: string) => path !== '' && path.split('/').some((seg) => seg === '' || seg === '.' || seg === '..');
    if (oddSegment(prefix) || oddSegment(raw)) {
      throw new InvalidArgumentError(`s3 URL ${url}: the prefix has an empty, '.' or '..' segment; give it as s3://BUCKET/a/b`);
    }
    return new IncrementalCheckpointStore(new S3Objects(bucket, prefix, { ...s3ConnectionFromEnv(options.env ?? process.env), ...options.s3 }), hold);
  }
  throw new InvalidArgumentError(`a checkpoint store URL is file:///DIR or s3://BUCKET/PREFIX, got scheme ${u.protocol} in ${JSON.stringify(url)}`);
}
