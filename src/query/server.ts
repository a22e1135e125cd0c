import { timingSafeEqual } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, type RouteHandlerMethod } from 'fastify';
import { hostHeaderCheck, InvalidArgumentError, isLoopbackName, isShardflowError } from '../index.js';
import type { QueryResult, QueryService } from './queryService.js';
import { checkHost } from './queryService.js';
import { clientErrorAnswer, errorBody as err, frameworkErrorAnswer, guardRequest, MAX_REQUEST_TARGET, type Refusal } from './requestGuard.js';

export type { ErrorBody } from './requestGuard.js';

/** Options of `startQueryServer`. */
export interface QueryServerOptions {
  readonly service: QueryService;
  /** Address to listen on. Default `127.0.0.1` (only this machine). */
  readonly host?: string;
  /** Port; 0 picks a free one. Default 7070. */
  readonly port?: number;
  /** When set, every request needs `Authorization: Bearer <token>`; the admin routes need it always. */
  readonly token?: string;
  /**
   * `Host` header names answered besides loopback names (and, on a non-loopback bind, the bound
   * name and IP addresses): `name` or `.domain` (see `hostHeaderCheck`). Default none.
   */
  readonly allowedHosts?: readonly string[];
  /** Listen on a non-loopback `host` without a token. Default false: refused (see `startQueryServer`). */
  readonly insecure?: boolean;
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

/** Per-route settings kept in fastify's route `config`. */
interface RouteConfig {
  /** Query parameters the route reads; any other is refused. */
  readonly query?: readonly string[];
  /** Needs the token even when the server has none (then it is refused). */
  readonly admin?: boolean;
  /** Answered without a token (`/v1/health`). */
  readonly open?: boolean;
}

/** One route of the API. */
interface Route {
  readonly method: 'GET' | 'DELETE';
  readonly url: string;
  readonly config: RouteConfig;
  readonly handler: RouteHandlerMethod;
}

/** Methods answered 405 on a known path they are not routed for (HEAD comes with every GET). */
const OTHER_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

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
 * | `GET /v1/top/sites?limit=`         | `TopSitesBody` (hosts by registrable domain) |
 * | `GET /v1/health`                   | `{ status: 'ok', partitions }` |
 * | `DELETE /v1/hosts/:host`           | `DropHostReport` (needs the token) |
 *
 * Every other answer is an `ErrorBody`: 400 `invalid_url` / `invalid_request` with the reason
 * (also for a bad percent-escape, an unknown or repeated query parameter, a request body),
 * 401 `unauthorized`, 403 `forbidden` for a `Host` header the server does not answer to (DNS
 * rebinding, see `hostHeaderCheck`), 404 `not_found` with the reason, 405 `method_not_allowed`
 * with `Allow`, 408/414/431 `invalid_request` for a slow or over-long request, 503 `unavailable`
 * when a partition (or, on a cluster, the broker) does not answer, 500 `internal`.
 *
 * Listens on 127.0.0.1 unless told otherwise; a non-loopback `host` needs a `token` or
 * `insecure: true`.
 *
 * @throws (rejects) InvalidArgumentError for an empty token, a bad `allowedHosts` entry, or a
 *   non-loopback `host` without a token nor `insecure`; the listen error (EADDRINUSE, ...)
 */
export async function startQueryServer(options: QueryServerOptions): Promise<QueryServer> {
  const { service } = options;
  const host = options.host ?? '127.0.0.1';
  if (options.token !== undefined && options.token.length === 0) throw new InvalidArgumentError('token must not be empty');
  if (options.token === undefined && !options.insecure && !isLoopbackName(host)) {
    throw new InvalidArgumentError(`refusing to serve the query API on ${host} without a token: anyone who can reach that address could read the index; give a token, or insecure: true to serve it unauthenticated`);
  }
  const hostRefusal = hostHeaderCheck({ bindHost: host, ...(options.allowedHosts ? { allowedHosts: options.allowedHosts } : {}) });
  const expected = options.token !== undefined ? Buffer.from(`Bearer ${options.token}`) : undefined;
  const send = (reply: FastifyReply, refusal: Refusal): FastifyReply => reply.code(refusal.status).send(refusal.body);
  const app = Fastify({
    logger: false,
    // Requests without Host reach the Host check (403 in our shape) instead of Node's bare 400.
    http: { requireHostHeader: false },
    // Path parameters are bounded by the request-target limit, not the router's 100 characters.
    routerOptions: { maxParamLength: MAX_REQUEST_TARGET },
    clientErrorHandler: clientErrorAnswer,
    frameworkErrors: (error, req, reply) => {
      const refused = guardRequest(req.raw.url ?? '', req.headers, hostRefusal);
      return send(reply, refused ?? frameworkErrorAnswer(error, req.raw.url ?? ''));
    },
  });
  // No route reads a body: none is parsed (guardRequest refuses them before parsing anyway).
  app.removeAllContentTypeParsers();

  app.addHook('onRequest', async (req, reply) => {
    const refused = guardRequest(req.raw.url ?? '', req.headers, hostRefusal);
    if (refused) return send(reply, refused);
    const config = (req.routeOptions.config ?? {}) as RouteConfig;
    if (!config.open && (expected !== undefined || config.admin)) {
      const given = Buffer.from(String(req.headers.authorization ?? ''));
      if (!expected || given.length !== expected.length || !timingSafeEqual(given, expected)) {
        reply.header('www-authenticate', 'Bearer');
        return reply.code(401).send(err('unauthorized', expected ? 'a valid "Authorization: Bearer <token>" header is required' : 'admin routes need the server to run with a token'));
      }
    }
    if (config.query) {
      const reason = queryParamsRefusal(req, config.query);
      if (reason !== undefined) return reply.code(400).send(err('invalid_request', reason));
    }
  });

  app.setErrorHandler((error, _req, reply) => {
    if (isShardflowError(error)) {
      if (error.code === 'SF_ERR_INVALID_URL') return reply.code(400).send(err('invalid_url', error.message));
      if (error.code === 'SF_ERR_INVALID_ARGUMENT') return reply.code(400).send(err('invalid_request', error.message));
      if (error.code === 'SF_ERR_ACTOR_STOPPED' || error.code === 'SF_ERR_STORE_CLOSED') return reply.code(503).send(err('unavailable', error.message));
      // A cluster's server reads partitions through the broker: one it cannot reach is the partitions' unavailability, not a bug.
      if (error.code === 'SF_ERR_BROKER_DISCONNECTED') return reply.code(503).send(err('unavailable', `the broker does not answer: ${error.message}`));
    }
    const status = (error as { statusCode?: number }).statusCode;
    if (status !== undefined && status >= 400 && status < 500) return reply.code(status).send(err('invalid_request', (error as Error).message));
    return reply.code(500).send(err('internal', (error as Error).message));
  });
  app.setNotFoundHandler((req, reply) => reply.code(404).send(err('not_found', `no route ${req.method} ${(req.raw.url ?? '').split('?')[0]}`)));

  const routes: Route[] = [
    { method: 'GET', url: '/v1/health', config: { open: true, query: [] }, handler: async () => ({ status: 'ok', partitions: service.partitioner.partitions }) },
    { method: 'GET', url: '/v1/page', config: { query: ['url'] }, handler: async (req, reply) => answer(reply, await service.page(urlParam(req))) },
    { method: 'GET', url: '/v1/outlinks', config: { query: ['url', 'limit', 'offset'] }, handler: async (req, reply) => answer(reply, await service.outlinks(urlParam(req), paging(req))) },
    { method: 'GET', url: '/v1/backlinks', config: { query: ['url', 'limit', 'offset'] }, handler: async (req, reply) => answer(reply, await service.backlinks(urlParam(req), paging(req))) },
    { method: 'GET', url: '/v1/hosts/:host', config: { query: ['limit'] }, handler: async (req, reply) => answer(reply, await service.host((req.params as { host: string }).host, { ...limitOnly(req) })) },
    { method: 'GET', url: '/v1/top/pages', config: { query: ['limit'] }, handler: async (req) => service.topPages(limitOnly(req)) },
    { method: 'GET', url: '/v1/top/hosts', config: { query: ['limit'] }, handler: async (req) => service.topHosts(limitOnly(req)) },
    { method: 'GET', url: '/v1/top/sites', config: { query: ['limit'] }, handler: async (req) => service.topSites(limitOnly(req)) },
    {
      method: 'DELETE', url: '/v1/hosts/:host', config: { admin: true, query: [] }, handler: async (req, reply) => {
        // Not a missing resource but an operation this server does not offer (found by a new
        // user: a 404 `not_found` on `serve --cluster`): 501, as RFC 9110 section 15.6.2 has it.
        if (!options.dropHost) return reply.code(501).send(err('not_implemented', 'this server does not drop hosts: `shardflow serve --data-dir DIR` (one process) does; on a cluster (`serve --cluster`, `crawl --cluster --serve`) a host cannot be dropped yet'));
        const dropped = checkHost((req.params as { host: string }).host);
        const report = await options.dropHost(dropped);
        service.invalidate();
        return report;
      },
    },
  ];
  for (const route of routes) app.route(route);
  // A known path with a method it does not take: 405 with the methods it takes.
  for (const url of new Set(routes.map((r) => r.url))) {
    const taken = routes.filter((r) => r.url === url).map((r) => r.method);
    const allow = [...taken.flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m]))].join(', ');
    const others = OTHER_METHODS.filter((m) => !(taken as string[]).includes(m));
    app.route({
      method: [...others],
      url,
      config: {} satisfies RouteConfig,
      handler: async (req, reply) => reply.code(405).header('allow', allow).send(err('method_not_allowed', `${req.method} is not allowed on ${(req.raw.url ?? '').split('?')[0]}: use ${allow}`)),
    });
  }

  await app.listen({ host, port: options.port ?? 7070 });
  const address = app.server.address() as AddressInfo;
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return { url: `http://${shown}:${address.port}`, fastify: app, close: () => app.close() };
}

/** Why the query parameters of `req` do not fit a route reading `known`, or `undefined`. */
function queryParamsRefusal(req: FastifyRequest, known: readonly string[]): string | undefined {
  for (const [name, value] of Object.entries(query(req))) {
    if (!known.includes(name)) {
      return `unknown query parameter ${JSON.stringify(name)} for ${req.routeOptions.url}: it takes ${known.length ? known.map((k) => JSON.stringify(k)).join(', ') : 'none'}`;
    }
    if (Array.isArray(value)) return `query parameter ${JSON.stringify(name)} is given ${value.length} times: give it once`;
  }
  return undefined;
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
