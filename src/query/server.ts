import { timingSafeEqual } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { InvalidArgumentError, isShardflowError } from '../errors.js';
import type { QueryResult, QueryService } from './queryService.js';
import { checkHost } from './queryService.js';

/** Options of `startQueryServer`. */
export interface QueryServerOptions {
  readonly service: QueryService;
  /** Address to listen on. Default `127.0.0.1` (only this machine). */
  readonly host?: string;
  /** Port; 0 picks a free one. Default 7070. */
  readonly port?: number;
  /** When set, every request needs `Authorization: Bearer <token>`; the admin routes need it always. */
  readonly token?: string;
  /** Drops a host (`DELETE /v1/hosts/:host`); absent: the route answers 404. */
  readonly dropHost?: (host: string) => Promise<unknown>;
}

/** A running query server. */
export interface QueryServer {
  /** `http://host:port`. */
  readonly url: string;
  readonly fastify: FastifyInstance;
  close(): Promise<void>;
}

/** Error answer of every route: `error` is a stable code, `reason` says what to fix. */
export interface ErrorBody {
  readonly error: 'invalid_url' | 'invalid_request' | 'not_found' | 'unauthorized' | 'unavailable' | 'internal';
  readonly reason: string;
  readonly detail?: unknown;
}

/**
 * The query API over HTTP (fastify), JSON in and out; shapes in docs/query-api.md.
 *
 * | route                              | answer        |
 * |------------------------------------|---------------|
 * | `GET /v1/page?url=`                | `PageBody`    |
 * | `GET /v1/outlinks?url=&limit=&offset=` | `LinksBody` |
 * | `GET /v1/backlinks?url=&limit=&offset=` | `LinksBody` (by source score) |
 * | `GET /v1/hosts/:host?limit=`       | `HostBody`    |
 * | `GET /v1/top/pages?limit=`         | `TopPagesBody`|
 * | `GET /v1/top/hosts?limit=`         | `TopHostsBody`|
 * | `GET /v1/health`                   | `{ status: 'ok', partitions }` |
 * | `DELETE /v1/hosts/:host`           | `DropHostReport` (needs the token) |
 *
 * Status codes: 400 `invalid_url` / `invalid_request` with the reason, 401 `unauthorized`,
 * 404 `not_found` with the reason, 503 `unavailable` when a partition does not answer.
 * Listens on 127.0.0.1 unless told otherwise.
 *
 * @throws (rejects) the listen error (EADDRINUSE, ...); InvalidArgumentError for an empty token
 */
export async function startQueryServer(options: QueryServerOptions): Promise<QueryServer> {
  const { service } = options;
  if (options.token !== undefined && options.token.length === 0) throw new InvalidArgumentError('token must not be empty');
  const expected = options.token !== undefined ? Buffer.from(`Bearer ${options.token}`) : undefined;
  const app = Fastify({ logger: false });

  app.addHook('onRequest', async (req, reply) => {
    if (req.url.startsWith('/v1/health')) return;
    const needs = expected !== undefined || req.method === 'DELETE';
    if (!needs) return;
    const given = Buffer.from(String(req.headers.authorization ?? ''));
    if (!expected || given.length !== expected.length || !timingSafeEqual(given, expected)) {
      reply.header('www-authenticate', 'Bearer');
      return reply.code(401).send(err('unauthorized', expected ? 'a valid "Authorization: Bearer <token>" header is required' : 'admin routes need the server to run with a token'));
    }
  });

  app.setErrorHandler((error, _req, reply) => {
    if (isShardflowError(error)) {
      if (error.code === 'SF_ERR_INVALID_URL') return reply.code(400).send(err('invalid_url', error.message));
      if (error.code === 'SF_ERR_INVALID_ARGUMENT') return reply.code(400).send(err('invalid_request', error.message));
      if (error.code === 'SF_ERR_ACTOR_STOPPED' || error.code === 'SF_ERR_STORE_CLOSED') return reply.code(503).send(err('unavailable', error.message));
    }
    const status = (error as { statusCode?: number }).statusCode;
    if (status !== undefined && status >= 400 && status < 500) return reply.code(status).send(err('invalid_request', (error as Error).message));
    return reply.code(500).send(err('internal', (error as Error).message));
  });
  app.setNotFoundHandler((req, reply) => reply.code(404).send(err('not_found', `no route ${req.method} ${req.url.split('?')[0]}`)));

  app.get('/v1/health', async () => ({ status: 'ok', partitions: service.partitioner.partitions }));
  app.get('/v1/page', async (req, reply) => answer(reply, await service.page(urlParam(req))));
  app.get('/v1/outlinks', async (req, reply) => answer(reply, await service.outlinks(urlParam(req), paging(req))));
  app.get('/v1/backlinks', async (req, reply) => answer(reply, await service.backlinks(urlParam(req), paging(req))));
  app.get('/v1/hosts/:host', async (req, reply) => answer(reply, await service.host((req.params as { host: string }).host, { ...limitOnly(req) })));
  app.get('/v1/top/pages', async (req) => service.topPages(limitOnly(req)));
  app.get('/v1/top/hosts', async (req) => service.topHosts(limitOnly(req)));
  app.delete('/v1/hosts/:host', async (req, reply) => {
    if (!options.dropHost) return reply.code(404).send(err('not_found', 'this server does not drop hosts'));
    const host = checkHost((req.params as { host: string }).host);
    const report = await options.dropHost(host);
    service.invalidate();
    return report;
  });

  await app.listen({ host: options.host ?? '127.0.0.1', port: options.port ?? 7070 });
  const address = app.server.address() as AddressInfo;
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return { url: `http://${shown}:${address.port}`, fastify: app, close: () => app.close() };
}

function err(error: ErrorBody['error'], reason: string, detail?: unknown): ErrorBody {
  return { error, reason, ...(detail !== undefined ? { detail } : {}) };
}

function answer<T>(reply: FastifyReply, result: QueryResult<T>): T | FastifyReply {
  if (result.found) return result.body;
  return reply.code(404).send(err('not_found', result.reason, result.detail));
}

function query(req: FastifyRequest): Record<string, unknown> {
  return (req.query ?? {}) as Record<string, unknown>;
}

/** The `url` query parameter. @throws InvalidArgumentError when missing or repeated */
function urlParam(req: FastifyRequest): string {
  const v = query(req).url;
  if (typeof v !== 'string' || v.length === 0) throw new InvalidArgumentError('query parameter "url" is required (one absolute http or https URL)');
  return v;
}

function intParam(req: FastifyRequest, name: string): number | undefined {
  const v = query(req)[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || !/^\d+$/.test(v)) throw new InvalidArgumentError(`query parameter "${name}" must be a non-negative integer, got ${JSON.stringify(v)}`);
  return Number(v);
}

function paging(req: FastifyRequest): { limit?: number; offset?: number } {
  const limit = intParam(req, 'limit');
  const offset = intParam(req, 'offset');
  return { ...(limit !== undefined ? { limit } : {}), ...(offset !== undefined ? { offset } : {}) };
}

function limitOnly(req: FastifyRequest): { limit?: number } {
  const limit = intParam(req, 'limit');
  return limit !== undefined ? { limit } : {};
}
