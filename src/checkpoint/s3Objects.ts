/**
 * Checkpoint objects in S3-compatible object storage (`s3://BUCKET/PREFIX`): object `a/b` is
 * the S3 object `PREFIX/a/b` of BUCKET. An S3 PUT is atomic (an object is visible only once
 * complete), which is all the checkpoint store asks. The requests are signed and sent by
 * `S3Http` (s3Http.ts: the AWS SDK's SigV4 signer, undici, kept-alive connections, the SDK's
 * standard retries).
 *
 * Where and as whom, from the usual AWS environment variables (or `env`):
 * - `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL`: the endpoint (an S3-compatible server such as
 *   scripts/s3/start.sh's S3Proxy); with one given, requests use path-style addressing
 *   (`http://host/BUCKET/KEY`), which such servers expect. Without one: AWS S3 itself.
 * - `AWS_REGION` or `AWS_DEFAULT_REGION` (`us-east-1` when neither is set).
 * - `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY` (+ `AWS_SESSION_TOKEN`); without them, the
 *   AWS SDK's default provider chain (shared config files, container and instance roles).
 *
 * No request carries the newer optional checksum headers: S3-compatible servers do not all
 * implement them, and the checkpoint store checks every file's size and SHA-256 itself on
 * restore (a PUT from memory signs its body's SHA-256, which the server checks). Deletes are
 * one DeleteObject per object (DeleteObjects needs a Content-MD5 or checksum header that
 * S3Proxy answers with 501 NotImplemented).
 */
import { createReadStream } from 'node:fs';
import type { Readable } from 'node:stream';
import { InvalidArgumentError } from '../errors.js';
import type { CheckpointObjects, ListedObject } from './objects.js';
import { forEachLimit } from './limit.js';
import { S3Http, type S3Connection } from './s3Http.js';

/** Deletes in flight at once. */
const DELETE_CONCURRENCY = 8;

/**
 * The connection the AWS environment variables in `env` describe (see the module doc).
 * @throws InvalidArgumentError when the endpoint variable is not a URL
 */
export function s3ConnectionFromEnv(env: NodeJS.ProcessEnv): S3Connection {
  const endpoint = env.AWS_ENDPOINT_URL_S3 || env.AWS_ENDPOINT_URL || undefined;
  if (endpoint) {
    try {
      new URL(endpoint);
    } catch {
      throw new InvalidArgumentError(`AWS_ENDPOINT_URL is not a URL: ${JSON.stringify(endpoint)}`);
    }
  }
  return {
    region: env.AWS_REGION || env.AWS_DEFAULT_REGION || 'us-east-1',
    ...(endpoint ? { endpoint, forcePathStyle: true } : {}),
    ...(env.AWS_ACCESS_KEY_ID && env.AWS_SECRET_ACCESS_KEY
      ? { credentials: { accessKeyId: env.AWS_ACCESS_KEY_ID, secretAccessKey: env.AWS_SECRET_ACCESS_KEY, ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}) } }
      : {}),
  };
}

export class S3Objects implements CheckpointObjects {
  readonly url: string;
  readonly server: string;
  readonly #http: S3Http;
  readonly #prefix: string;

  /**
   * @param bucket the bucket (it must exist)
   * @param prefix key prefix without leading or trailing `/` ('' for the bucket's root)
   * @param connection endpoint, region and credentials (`s3ConnectionFromEnv(process.env)` by default)
   * @throws InvalidArgumentError for an endpoint that is not an http(s) URL
   */
  constructor(bucket: string, prefix: string, connection: S3Connection = s3ConnectionFromEnv(process.env)) {
    this.#prefix = prefix === '' ? '' : `${prefix}/`;
    this.url = `s3://${bucket}/${prefix}`;
    this.#http = new S3Http(bucket, connection);
    this.server = this.#http.server;
  }

  async putFile(name: string, localPath: string, bytes: number): Promise<void> {
    await this.#http.send({ method: 'PUT', key: this.#prefix + name, body: () => createReadStream(localPath), contentLength: bytes });
  }

  async sync(): Promise<void> {
    // nothing to do: an S3 PUT is durable once it returned
  }

  async putBytes(name: string, bytes: Uint8Array): Promise<void> {
    await this.#http.send({ method: 'PUT', key: this.#prefix + name, body: bytes });
  }

  async putAllThen(first: ReadonlyArray<{ readonly name: string; readonly bytes: Uint8Array }>, last: { readonly name: string; readonly bytes: Uint8Array }): Promise<void> {
    // A PUT is durable once it returns: the first ones side by side, then the last.
    await Promise.all(first.map((o) => this.putBytes(o.name, o.bytes)));
    await this.putBytes(last.name, last.bytes);
  }

  async getBytes(name: string): Promise<Buffer | undefined> {
    const r = await this.#http.send({ method: 'GET', key: this.#prefix + name, accept: [404] });
    return r.body;
  }

  async getRange(name: string, offset: number, length: number): Promise<Buffer | undefined> {
    if (length <= 0) return Buffer.alloc(0);
    const r = await this.#http.send({ method: 'GET', key: this.#prefix + name, headers: { range: `bytes=${offset}-${offset + length - 1}` }, accept: [404, 416] });
    if (!r.ok) {
      // A range that starts at or past the object's end (416): nothing there.
      return r.status === 416 ? Buffer.alloc(0) : undefined;
    }
    // A server that ignores Range answers 200 with the whole object: cut it here.
    return r.status === 200 ? r.body.subarray(offset, offset + length) : r.body;
  }

  async getStream(name: string): Promise<Readable | undefined> {
    const r = await this.#http.stream({ method: 'GET', key: this.#prefix + name, accept: [404] });
    return r.body;
  }

  async list(prefix: string): Promise<ListedObject[]> {
    const out: ListedObject[] = [];
    let token: string | undefined;
    do {
      const page = await this.#http.listPage(this.#prefix + prefix, token);
      for (const o of page.objects) {
        // Filesystem-backed servers list folders as keys ending in '/': not objects.
        if (!o.key || o.key.endsWith('/')) continue;
        out.push({ name: o.key.slice(this.#prefix.length), bytes: o.size });
      }
      token = page.next;
    } while (token);
    return out;
  }

  async delete(names: readonly string[]): Promise<void> {
    if (names.length === 0) return;
    // DeleteObject of a missing key answers 204 (S3) or 404 (some servers): gone either way.
    await forEachLimit(names, DELETE_CONCURRENCY, async (name) => {
      await this.#http.send({ method: 'DELETE', key: this.#prefix + name, accept: [404] });
    });
  }

  async close(): Promise<void> {
    await this.#http.close();
  }
}
