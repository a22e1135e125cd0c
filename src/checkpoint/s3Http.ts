/**
 * Signed requests of the S3 REST API over kept-alive connections: what `S3Objects` sends.
 *
 * Each request is signed with AWS Signature Version 4 by `@smithy/signature-v4` (the signer
 * of the AWS SDK for JavaScript v3, https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-authenticating-requests.html)
 * and sent by undici over a pool of kept-alive connections; listings and error bodies are
 * parsed by `fast-xml-parser`. Credentials, when none are given, come from the SDK's default
 * provider chain (`@aws-sdk/credential-provider-node`: shared config files, SSO, container and
 * instance roles), loaded on the first request that needs them.
 *
 * Why not `@aws-sdk/client-s3` itself: a checkpointing worker sends thousands of small
 * requests (a metric round's WAL tail puts, listings and deletes of each partition), and the
 * client's per-request machinery (middleware stack, endpoint rules, schema serde) cost
 * 1.3 to 2.5 ms of CPU per PutObject here against about 0.5 ms for the same signed request
 * sent this way (docs/checkpoints.md, "S3 requests"). The tests still read and write the
 * objects with `@aws-sdk/client-s3` as an independent client.
 *
 * A request refused as RequestTimeTooSkewed is signed again with the server's clock (its
 * answer's Date), as the AWS SDKs do. Retries follow the AWS SDKs' "standard" mode (AWS SDKs and Tools Reference Guide, "Retry
 * behavior"): up to `maxAttempts` (3) attempts for a network error, a 5xx, 429 or a
 * throttling or timeout code, waiting a random time up to 100 ms x 2^attempt (20 s at most)
 * between them ("full jitter", Brooker, "Exponential Backoff And Jitter", AWS Architecture
 * Blog, 2015). Every request the checkpoint store sends is idempotent (PUT of a whole object,
 * GET, DELETE, LIST), so a retry after a lost answer is safe.
 */
import { SignatureV4 } from '@smithy/signature-v4';
import { XMLParser } from 'fast-xml-parser';
import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import { Readable } from 'node:stream';
import { Agent, request, type Dispatcher } from 'undici';
import { InvalidArgumentError, S3RequestError } from '../errors.js';

/** AWS credentials: an access key, its secret and, for temporary ones, a session token. */
export interface S3Credentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
  /** When temporary credentials expire (a provider is asked again after it). */
  readonly expiration?: Date;
}

/** Where and as whom an S3 checkpoint store sends its requests (`s3ConnectionFromEnv` reads them from the AWS variables). */
export interface S3Connection {
  /**
   * The S3-compatible server's URL (`http://127.0.0.1:9000`); requests then use path-style
   * addressing unless `forcePathStyle` is false. Default: AWS S3 of `region`
   * (`https://BUCKET.s3.REGION.amazonaws.com`, virtual-hosted style).
   */
  readonly endpoint?: string;
  /** The region requests are signed for (default `us-east-1`). */
  readonly region?: string;
  /** `http://endpoint/BUCKET/KEY` instead of `http://BUCKET.endpoint/KEY` (default: true with an `endpoint`). */
  readonly forcePathStyle?: boolean;
  /** Fixed credentials or a provider asked before each request (it should cache). Default: the AWS SDK's default provider chain. */
  readonly credentials?: S3Credentials | (() => Promise<S3Credentials>);
  /** Attempts per request, the first included (default 3; 1 for no retry). */
  readonly maxAttempts?: number;
  /** Connections kept alive per origin (default 16). */
  readonly connections?: number;
  /**
   * How long an attempt waits for the answer's headers, and then between two parts of its
   * body, ms (default 120,000): a server that accepts and never answers fails the attempt
   * (retried as a network error) instead of holding the request for undici's 300 s.
   */
  readonly timeoutMs?: number;
}

/**
 * One answer: status, headers and the body (read whole or left as a stream) of a 2xx;
 * `body` undefined for a status of `S3Request.accept` (its error body read and dropped).
 */
export type S3Response<B> =
  | { readonly status: number; readonly ok: true; readonly headers: Readonly<Record<string, string | string[] | undefined>>; readonly body: B }
  | { readonly status: number; readonly ok: false; readonly headers: Readonly<Record<string, string | string[] | undefined>>; readonly body: undefined };

/** A request of `S3Http.send`. */
export interface S3Request {
  readonly method: 'GET' | 'PUT' | 'DELETE' | 'HEAD';
  /** The object key; '' for the bucket itself (a listing). */
  readonly key: string;
  readonly query?: Readonly<Record<string, string>>;
  readonly headers?: Readonly<Record<string, string>>;
  /** A body in memory (its SHA-256 is signed) or a stream opened anew for each attempt (sent as UNSIGNED-PAYLOAD; give `contentLength`). */
  readonly body?: Uint8Array | (() => Readable);
  readonly contentLength?: number;
  /**
   * Statuses returned to the caller instead of thrown (404 for a missing object, 416 past its
   * end). A 404 whose code is `NoSuchBucket` is thrown all the same: a missing bucket is no
   * missing object.
   */
  readonly accept?: readonly number[];
}

const DEFAULT_ATTEMPTS = 3;
const DEFAULT_TIMEOUT_MS = 120_000;
/** Base and cap of the backoff between attempts, ms (the AWS SDKs' standard mode). */
const BACKOFF_BASE_MS = 100;
const BACKOFF_MAX_MS = 20_000;
const RETRYABLE_CODES = new Set(['SlowDown', 'Throttling', 'ThrottlingException', 'RequestTimeout', 'RequestTimeTooSkewed', 'InternalError', 'ServiceUnavailable', 'RequestThrottled']);
const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

const xml = new XMLParser({ ignoreAttributes: true, parseTagValue: false, isArray: (name) => name === 'Contents' });

/** Signs and sends the requests of one bucket. */
export class S3Http {
  readonly #bucket: string;
  readonly #origin: string;
  readonly #host: string;
  readonly #pathPrefix: string;
  readonly #signer: SignatureV4;
  readonly #agent: Agent;
  readonly #attempts: number;
  /** For messages: the server's URL. */
  readonly #server: string;

  /** The server's URL (the endpoint, or AWS S3's of the region). */
  get server(): string {
    return this.#server;
  }
  /** Server clock minus ours, ms: set from the Date of an answer that said RequestTimeTooSkewed, as the AWS SDKs correct it. */
  #clockOffsetMs = 0;

  /**
   * @throws InvalidArgumentError for an endpoint that is not an http(s) URL or a bucket name
   *   that cannot be a host name in virtual-hosted style
   */
  constructor(bucket: string, connection: S3Connection) {
    this.#bucket = bucket;
    const region = connection.region || 'us-east-1';
    let base: URL;
    try {
      base = new URL(connection.endpoint ?? `https://s3.${region}.amazonaws.com`);
    } catch {
      throw new InvalidArgumentError(`S3 endpoint is not a URL: ${JSON.stringify(connection.endpoint)}`);
    }
    if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new InvalidArgumentError(`S3 endpoint ${connection.endpoint} is not http(s)`);
    // Virtual-hosted style needs a bucket that is a host name, and over TLS one without dots
    // (the certificate covers *.s3.REGION.amazonaws.com only): others go path-style, as the
    // AWS SDKs send them.
    const hostable = /^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/.test(bucket) || (base.protocol === 'http:' && /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket));
    const pathStyle = connection.forcePathStyle ?? (connection.endpoint !== undefined || !hostable);
    if (!pathStyle && !hostable) throw new InvalidArgumentError(`bucket ${JSON.stringify(bucket)} cannot be a host name: use path-style addressing (forcePathStyle)`);
    const basePath = base.pathname.replace(/\/+$/, '');
    this.#host = pathStyle ? base.host : `${bucket}.${base.host}`;
    this.#origin = `${base.protocol}//${this.#host}`;
    this.#pathPrefix = pathStyle ? `${basePath}/${escapeUri(bucket)}` : basePath;
    const attempts = connection.maxAttempts ?? DEFAULT_ATTEMPTS;
    const connections = connection.connections ?? 16;
    const timeoutMs = connection.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!Number.isSafeInteger(attempts) || attempts < 1) throw new InvalidArgumentError(`S3 maxAttempts is an integer >= 1, got ${String(attempts)}`);
    if (!Number.isSafeInteger(connections) || connections < 1) throw new InvalidArgumentError(`S3 connections is an integer >= 1, got ${String(connections)}`);
    if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) throw new InvalidArgumentError(`S3 timeoutMs is an integer >= 1, got ${String(timeoutMs)}`);
    if (connection.region !== undefined && !/^[a-z0-9-]+$/.test(connection.region)) throw new InvalidArgumentError(`S3 region is a region name such as us-east-1, got ${JSON.stringify(connection.region)}`);
    this.#attempts = attempts;
    this.#server = `${base.protocol}//${base.host}${basePath}`;
    this.#agent = new Agent({ connections, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
    const given = connection.credentials;
    this.#signer = new SignatureV4({
      service: 's3',
      region,
      sha256: Sha256,
      // S3 signs the path as sent, escaped once (not twice as other services).
      uriEscapePath: false,
      applyChecksum: true,
      credentials: given === undefined ? defaultCredentials() : given,
    });
  }

  /**
   * Sends `req`, retrying as the module doc says, and reads the whole body.
   * @throws S3RequestError for a status >= 300 not in `req.accept`, or a network error, after the last attempt
   */
  async send(req: S3Request): Promise<S3Response<Buffer>> {
    return this.#attempt(req, async (body) => Buffer.from(await body.arrayBuffer()));
  }

  /**
   * Sends `req` and returns the body as a stream (for a large GET); a refused request's body
   * is read and thrown as `send` does.
   */
  async stream(req: S3Request): Promise<S3Response<Readable>> {
    return this.#attempt(req, async (body) => body);
  }

  /**
   * A ListObjectsV2 page of keys under `prefix` (at most `maxKeys`, the server's default 1,000 when not given).
   * @returns the page's objects (key and size) and the token of the next page, if any
   */
  async listPage(prefix: string, continuationToken: string | undefined, maxKeys?: number): Promise<{ objects: Array<{ key: string; size: number }>; next: string | undefined }> {
    const query: Record<string, string> = { 'list-type': '2', prefix };
    if (continuationToken !== undefined) query['continuation-token'] = continuationToken;
    if (maxKeys !== undefined) query['max-keys'] = String(maxKeys);
    const r = await this.send({ method: 'GET', key: '', query });
    if (!r.ok) throw new S3RequestError('GET', `s3://${this.#bucket}/?list-type=2&prefix=${prefix}`, r.status, 'Unexpected', `listing refused (server ${this.#server})`);
    const result = (xml.parse(r.body) as { ListBucketResult?: ListBucketResult }).ListBucketResult;
    if (!result) throw new S3RequestError('GET', `s3://${this.#bucket}/?list-type=2&prefix=${prefix}`, r.status, 'MalformedListing', `not a ListBucketResult (server ${this.#server}): ${r.body.subarray(0, 200).toString()}`);
    const objects = (result.Contents ?? []).map((c) => ({ key: String(c.Key ?? ''), size: Number(c.Size ?? 0) }));
    const truncated = String(result.IsTruncated) === 'true';
    return { objects, next: truncated && result.NextContinuationToken ? String(result.NextContinuationToken) : undefined };
  }

  /** Closes the kept-alive connections. */
  async close(): Promise<void> {
    await this.#agent.close();
  }

  async #attempt<B>(req: S3Request, read: (body: Dispatcher.ResponseData['body']) => Promise<B>): Promise<S3Response<B>> {
    for (let attempt = 1; ; attempt++) {
      let failure: S3RequestError;
      try {
        const { url, headers, body } = await this.#signed(req);
        const r = await request(url, { method: req.method, headers, body, dispatcher: this.#agent });
        if (r.statusCode < 300) return { status: r.statusCode, ok: true, headers: r.headers, body: await read(r.body) };
        failure = errorOf(this.#bucket, this.#server, req, r.statusCode, await r.body.arrayBuffer().then((b) => Buffer.from(b), () => Buffer.alloc(0)));
        const serverDate = Date.parse(String(r.headers.date ?? ''));
        if (failure.s3Code === 'RequestTimeTooSkewed' && Number.isFinite(serverDate)) this.#clockOffsetMs = serverDate - Date.now();
        if (req.accept?.includes(r.statusCode) && failure.s3Code !== 'NoSuchBucket') return { status: r.statusCode, ok: false, headers: r.headers, body: undefined };
      } catch (err) {
        if (err instanceof SigningError) throw new S3RequestError(req.method, `s3://${this.#bucket}/${req.key}`, 0, 'SigningFailed', `the request could not be signed (no credentials? a provider that failed?): ${(err.cause as Error)?.message ?? String(err.cause)}`, { cause: err.cause });
        const code = (err as { code?: string }).code ?? (err as Error).name ?? 'Error';
        failure = new S3RequestError(req.method, `s3://${this.#bucket}/${req.key}`, 0, code, `${(err as Error).message} (server ${this.#server})`, { cause: err });
      }
      if (!retryable(failure) || attempt >= this.#attempts) throw failure;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** attempt)));
    }
  }

  async #signed(req: S3Request): Promise<{ url: string; headers: Record<string, string>; body: Uint8Array | Readable | undefined }> {
    const path = req.key === '' ? `${this.#pathPrefix}/` : `${this.#pathPrefix}/${req.key.split('/').map(escapeUri).join('/')}`;
    const headers: Record<string, string> = { host: this.#host, ...req.headers };
    let body: Uint8Array | Readable | undefined;
    if (typeof req.body === 'function') {
      body = req.body();
      headers['x-amz-content-sha256'] = 'UNSIGNED-PAYLOAD';
      if (req.contentLength !== undefined) headers['content-length'] = String(req.contentLength);
    } else if (req.body !== undefined) {
      body = req.body;
      headers['content-length'] = String(req.body.byteLength);
      headers['x-amz-content-sha256'] = createHash('sha256').update(req.body).digest('hex');
    } else {
      headers['x-amz-content-sha256'] = EMPTY_SHA256;
    }
    const query = req.query ?? {};
    let signed: Awaited<ReturnType<SignatureV4['sign']>>;
    try {
      signed = await this.#signer.sign({ method: req.method, protocol: 'https:', hostname: this.#host, path, query: { ...query }, headers, body: undefined }, { signingDate: new Date(Date.now() + this.#clockOffsetMs) });
    } catch (err) {
      if (body instanceof Readable) body.destroy();
      throw new SigningError(err);
    }
    const search = Object.keys(query).sort().map((k) => `${escapeUri(k)}=${escapeUri(query[k]!)}`).join('&');
    const out = signed.headers as Record<string, string>;
    delete out.host; // undici sets it from the URL
    return { url: `${this.#origin}${path}${search ? `?${search}` : ''}`, headers: out, body };
  }

  /** For messages: `s3://BUCKET`. */
  toString(): string {
    return `s3://${this.#bucket}`;
  }
}

interface ListBucketResult {
  readonly Contents?: ReadonlyArray<{ readonly Key?: unknown; readonly Size?: unknown }>;
  readonly IsTruncated?: unknown;
  readonly NextContinuationToken?: unknown;
}

/** RFC 3986 escaping of one path segment or query part, as SigV4 canonicalizes it (`!'()*` escaped too). */
function escapeUri(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** A request that could not be signed (credentials missing or their provider failed): a configuration error, not retried. */
class SigningError extends Error {
  constructor(cause: unknown) {
    super('signing failed', { cause });
  }
}

function errorOf(bucket: string, server: string, req: S3Request, status: number, body: Buffer): S3RequestError {
  let code = status === 404 ? 'NotFound' : `Http${status}`;
  let message = '';
  if (body.length > 0) {
    try {
      const e = (xml.parse(body) as { Error?: { Code?: unknown; Message?: unknown } }).Error;
      if (e?.Code) code = String(e.Code);
      if (e?.Message) message = String(e.Message);
    } catch {
      message = body.subarray(0, 200).toString();
    }
  }
  return new S3RequestError(req.method, `s3://${bucket}/${req.key}`, status, code, `${message || 'no message'} (server ${server})`);
}

function retryable(err: S3RequestError): boolean {
  return err.status === 0 || err.status >= 500 || err.status === 429 || RETRYABLE_CODES.has(err.s3Code);
}

/** The SDK's default credential chain, imported on first use (most processes never sign). */
function defaultCredentials(): () => Promise<S3Credentials> {
  let provider: Promise<() => Promise<S3Credentials>> | undefined;
  return async () => {
    provider ??= import('@aws-sdk/credential-provider-node').then((m) => m.defaultProvider());
    return (await provider)();
  };
}

/** SHA-256 and HMAC-SHA-256 over node:crypto in the shape `@smithy/signature-v4` asks (`new Sha256(secret?)`, `update`, `digest`). */
class Sha256 {
  #hash: Hash | Hmac;
  readonly #secret: Uint8Array | undefined;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.#secret = secret === undefined ? undefined : toBytes(secret);
    this.#hash = this.#fresh();
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.#hash.update(toBytes(data));
  }
  async digest(): Promise<Uint8Array> {
    return this.#hash.digest();
  }
  reset(): void {
    this.#hash = this.#fresh();
  }
  #fresh(): Hash | Hmac {
    return this.#secret === undefined ? createHash('sha256') : createHmac('sha256', this.#secret);
  }
}

function toBytes(data: string | ArrayBuffer | ArrayBufferView): Uint8Array {
  if (typeof data === 'string') return Buffer.from(data, 'utf8');
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return new Uint8Array(data);
}
