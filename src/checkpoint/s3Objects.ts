/**
 * Checkpoint objects in S3-compatible object storage (`s3://BUCKET/PREFIX`) through
 * `@aws-sdk/client-s3`: object `a/b` is the S3 object `PREFIX/a/b` of BUCKET. An S3 PUT is
 * atomic (an object is visible only once complete), which is all the checkpoint store asks.
 *
 * Where and as whom, from the usual AWS environment variables (or `env`):
 * - `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL`: the endpoint (an S3-compatible server such as
 *   scripts/s3/start.sh's S3Proxy); with one given, requests use path-style addressing
 *   (`http://host/BUCKET/KEY`), which such servers expect. Without one: AWS S3 itself.
 * - `AWS_REGION` or `AWS_DEFAULT_REGION` (`us-east-1` when neither is set).
 * - `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY` (+ `AWS_SESSION_TOKEN`); without them, the
 *   SDK's default provider chain (shared config files, container and instance roles).
 *
 * The SDK's optional request and response checksums are off (`WHEN_REQUIRED`): S3-compatible
 * servers do not all implement the newer checksum headers, and the checkpoint store checks
 * every file's size and SHA-256 itself on restore. Deletes are one DeleteObject per object
 * (DeleteObjects needs a checksum header that S3Proxy answers with 501 NotImplemented).
 *
 * The SDK is imported on the first request, not with this module: it is the largest module
 * graph a worker would load (about 0.4 s of CPU at each process start here), and most
 * processes never checkpoint to S3.
 */
import type { S3Client, S3ClientConfig } from '@aws-sdk/client-s3';
import { createReadStream } from 'node:fs';
import type { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { InvalidArgumentError } from '../errors.js';
import type { CheckpointObjects, ListedObject } from './objects.js';
import { forEachLimit } from './limit.js';

type Sdk = typeof import('@aws-sdk/client-s3');

/** Deletes in flight at once. */
const DELETE_CONCURRENCY = 8;

/** The S3Client configuration the AWS environment variables in `env` describe (see the module doc). */
export function s3ConfigFromEnv(env: NodeJS.ProcessEnv): S3ClientConfig {
  const endpoint = env.AWS_ENDPOINT_URL_S3 || env.AWS_ENDPOINT_URL || undefined;
  const config: S3ClientConfig = {
    region: env.AWS_REGION || env.AWS_DEFAULT_REGION || 'us-east-1',
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  };
  if (endpoint) {
    try {
      new URL(endpoint);
    } catch {
      throw new InvalidArgumentError(`AWS_ENDPOINT_URL is not a URL: ${JSON.stringify(endpoint)}`);
    }
    config.endpoint = endpoint;
    config.forcePathStyle = true;
  }
  if (env.AWS_ACCESS_KEY_ID && env.AWS_SECRET_ACCESS_KEY) {
    config.credentials = {
      accessKeyId: env.AWS_ACCESS_KEY_ID,
      secretAccessKey: env.AWS_SECRET_ACCESS_KEY,
      ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}),
    };
  }
  return config;
}

export class S3Objects implements CheckpointObjects {
  readonly url: string;
  readonly #config: S3ClientConfig;
  #sdk: Promise<{ readonly sdk: Sdk; readonly client: S3Client }> | undefined;
  readonly #prefix: string;

  /**
   * @param bucket the bucket (it must exist)
   * @param prefix key prefix without leading or trailing `/` ('' for the bucket's root)
   * @param config the client's configuration (`s3ConfigFromEnv(process.env)` by default)
   */
  constructor(private readonly bucket: string, prefix: string, config: S3ClientConfig) {
    this.#prefix = prefix === '' ? '' : `${prefix}/`;
    this.url = `s3://${bucket}/${prefix}`;
    this.#config = config;
  }

  /** The SDK and this store's client, loaded and made on the first call. */
  #api(): Promise<{ readonly sdk: Sdk; readonly client: S3Client }> {
    this.#sdk ??= import('@aws-sdk/client-s3').then((sdk) => ({ sdk, client: new sdk.S3Client(this.#config) }));
    return this.#sdk;
  }

  async putFile(name: string, localPath: string, bytes: number): Promise<void> {
    const { sdk, client } = await this.#api();
    await client.send(new sdk.PutObjectCommand({
      Bucket: this.bucket,
      Key: this.#prefix + name,
      Body: createReadStream(localPath),
      ContentLength: bytes,
    }));
  }

  async sync(): Promise<void> {
    // nothing to do: an S3 PUT is durable once it returned
  }

  async putBytes(name: string, bytes: Uint8Array): Promise<void> {
    const { sdk, client } = await this.#api();
    await client.send(new sdk.PutObjectCommand({ Bucket: this.bucket, Key: this.#prefix + name, Body: bytes }));
  }

  async putAllThen(first: ReadonlyArray<{ readonly name: string; readonly bytes: Uint8Array }>, last: { readonly name: string; readonly bytes: Uint8Array }): Promise<void> {
    // A PUT is durable once it returns: the first ones side by side, then the last.
    await Promise.all(first.map((o) => this.putBytes(o.name, o.bytes)));
    await this.putBytes(last.name, last.bytes);
  }

  async getBytes(name: string): Promise<Buffer | undefined> {
    const body = await this.getStream(name);
    return body ? buffer(body) : undefined;
  }

  async getRange(name: string, offset: number, length: number): Promise<Buffer | undefined> {
    if (length <= 0) return Buffer.alloc(0);
    const { sdk, client } = await this.#api();
    let body: Readable;
    try {
      const r = await client.send(new sdk.GetObjectCommand({ Bucket: this.bucket, Key: this.#prefix + name, Range: `bytes=${offset}-${offset + length - 1}` }));
      body = r.Body as Readable;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      // A range that starts at or past the object's end (416): nothing there.
      if ((err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 416) return Buffer.alloc(0);
      throw err;
    }
    return buffer(body);
  }

  async getStream(name: string): Promise<Readable | undefined> {
    const { sdk, client } = await this.#api();
    try {
      const r = await client.send(new sdk.GetObjectCommand({ Bucket: this.bucket, Key: this.#prefix + name }));
      return r.Body as Readable;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async list(prefix: string): Promise<ListedObject[]> {
    const { sdk, client } = await this.#api();
    const out: ListedObject[] = [];
    let token: string | undefined;
    do {
      const r = await client.send(new sdk.ListObjectsV2Command({
        Bucket: this.bucket,
        Prefix: this.#prefix + prefix,
        ContinuationToken: token,
      }));
      for (const o of r.Contents ?? []) {
        // Filesystem-backed servers list folders as keys ending in '/': not objects.
        if (!o.Key || o.Key.endsWith('/')) continue;
        out.push({ name: o.Key.slice(this.#prefix.length), bytes: o.Size ?? 0 });
      }
      token = r.IsTruncated ? r.NextContinuationToken : undefined;
    } while (token);
    return out;
  }

  async delete(names: readonly string[]): Promise<void> {
    if (names.length === 0) return;
    const { sdk, client } = await this.#api();
    await forEachLimit(names, DELETE_CONCURRENCY, async (name) => {
      await client.send(new sdk.DeleteObjectCommand({ Bucket: this.bucket, Key: this.#prefix + name }));
    });
  }

  async close(): Promise<void> {
    if (this.#sdk) (await this.#sdk).client.destroy();
  }
}

function isNotFound(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } } | null;
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404;
}
