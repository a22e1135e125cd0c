import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import type { ActorSystem } from '../actor/system.js';
import { ActorStoppedError, InvalidArgumentError } from '../../errors.js';
import { summarizeError, type LifecycleEvent } from '../inspection.js';
import { hostHeaderCheck, isLoopbackName } from '../http/hostCheck.js';
import type { NamespaceFlowSource, TopicFlowSource } from './flowSource.js';
import { createInspectionMetrics, type InspectionMetrics } from './metrics.js';
import { loadPageAssets } from './pageAssets.js';

/** Options of {@link listenInspection}: where to listen and how. */
export interface InspectionListenOptions {
  /**
   * Interface to bind. Default `'127.0.0.1'`: the endpoint has no authentication, keep it local.
   * While bound to a loopback address, requests must name a loopback host in their `Host` header
   * (`127.0.0.1`, `localhost`, `[::1]`), which stops DNS-rebinding pages from reading it.
   */
  readonly host?: string;
  /** TCP port, 0..65535; default 0 (an ephemeral port, see {@link InspectionServer.url}). */
  readonly port?: number;
  /** Interval of SSE keep-alive comments on `/events`, in ms (> 0). Default 15 000. */
  readonly heartbeatMs?: number;
}

/** What {@link InspectionEndpoint.attach} serves besides the system's tree and events. */
export interface InspectionSources {
  /** Per-namespace sent/settled counts for `/metrics` (the web index's `FlowCounters`). */
  readonly flow?: NamespaceFlowSource;
  /** Per-topic counts for `/metrics` (the web index's `TopicFlowCounters`). */
  readonly topicFlow?: TopicFlowSource;
  /** Add prom-client's default process metrics to `/metrics`; default `false` (see `createInspectionMetrics`). */
  readonly processMetrics?: boolean;
}

/** Options of {@link startInspectionServer}. */
export interface InspectionServerOptions extends InspectionListenOptions, InspectionSources {}

/** A running inspection endpoint. */
export interface InspectionServer {
  /** Base URL, e.g. `http://127.0.0.1:40123`. */
  readonly url: string;
  /** The registry `/metrics` serves: this endpoint's own, never prom-client's global default. */
  readonly registry: Registry;
  /** Stops listening, ends open event streams and stops counting events. Idempotent. */
  close(): Promise<void>;
}

/**
 * An endpoint that may be listening before the actor system it shows exists (a job that creates
 * its system itself): until {@link attach}, `/tree`, `/tree.txt`, `/events` and `/metrics` answer
 * 503 and the page waits.
 */
export interface InspectionEndpoint extends InspectionServer {
  /**
   * Starts serving `system` (and `sources` on `/metrics`).
   * @throws `InvalidArgumentError` when a system is already attached; `ActorStoppedError` after `close()`.
   */
  attach(system: ActorSystem, sources?: InspectionSources): void;
}

/** Paths listed in 404 answers. */
const PATHS = ['/', '/tree', '/tree.txt', '/events', '/metrics'];

/** The page loads only its own script and style, and talks only to this endpoint. */
const PAGE_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/**
 * Serves the live supervision view of `system` over HTTP, read-only, from the same sources as the
 * CLI (`tree()` and `events$`), plus Prometheus metrics (routes: docs/console.md).
 * @throws (rejects) `InvalidArgumentError` for a bad port or heartbeat; the `listen` error (e.g.
 *   `EADDRINUSE`); the error reading the page's files.
 */
export async function startInspectionServer(system: ActorSystem, options: InspectionServerOptions = {}): Promise<InspectionServer> {
  const endpoint = await listenInspection(options);
  endpoint.attach(system, options);
  return endpoint;
}

/**
 * Listens for the inspection endpoint's routes:
 *
 * - `GET /`: the operator console, a page that shows the tree live (`page.html`, `page.js`,
 *   `page.css` beside this module);
 * - `GET /tree`: the {@link TreeNode} snapshot as JSON;
 * - `GET /tree.txt`: `system.renderTree()` as text;
 * - `GET /events`: Server-Sent Events, one per lifecycle event (`event:` the type, `data:` the
 *   event as JSON with `reason` summarised as `{ name, message, code? }`), a `:` comment every
 *   `heartbeatMs`; the stream ends when the system has terminated;
 * - `GET /metrics`: Prometheus text format from a registry of this endpoint's own (see
 *   `createInspectionMetrics` for names and labels).
 *
 * Other paths answer 404, other methods 405, a non-loopback `Host` on a loopback bind 403, the
 * system's routes 503 until a system is attached.
 * @throws (rejects) `InvalidArgumentError` for a bad port or heartbeat; the `listen` error (e.g.
 *   `EADDRINUSE`); the error reading the page's files.
 */
export async function listenInspection(options: InspectionListenOptions = {}): Promise<InspectionEndpoint> {
  const host = options.host ?? '127.0.0.1';
  const port = options.port ?? 0;
  const heartbeatMs = options.heartbeatMs ?? 15_000;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new InvalidArgumentError(`port must be an integer in 0..65535, got ${port}`);
  if (!(heartbeatMs > 0) || !Number.isFinite(heartbeatMs)) throw new InvalidArgumentError(`heartbeatMs must be a finite number > 0, got ${heartbeatMs}`);
  const assets = await loadPageAssets();
  // On a loopback bind only loopback names pass (no allow-list: the endpoint is local by design).
  const refusal = isLoopbackName(host) ? hostHeaderCheck({ bindHost: host }) : () => undefined;
  const registry = new Registry();
  /** The attached system and its metrics; undefined until `attach`. */
  let attached: { readonly system: ActorSystem; readonly metrics: InspectionMetrics } | undefined;
  let closed = false;

  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const refused = refusal(request.headers.host);
    if (refused !== undefined) {
      response.writeHead(403, { 'content-type': 'application/json' }).end(JSON.stringify({ error: `host not allowed: ${refused}` }));
      return;
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'application/json' }).end('{"error":"method not allowed"}');
      return;
    }
    const path = new URL(request.url ?? '/', 'http://localhost').pathname;
    const asset = assets.get(path);
    if (asset !== undefined) {
      response.writeHead(200, { 'content-type': asset.contentType, 'cache-control': 'no-store', 'content-security-policy': PAGE_CSP, 'x-content-type-options': 'nosniff' }).end(asset.body);
      return;
    }
    if (!PATHS.includes(path)) {
      response.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'not found', paths: PATHS }));
      return;
    }
    if (attached === undefined) {
      response.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' }).end('{"error":"no actor system attached yet: the job is starting"}');
      return;
    }
    const { system, metrics } = attached;
    switch (path) {
      case '/tree':
        response.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' }).end(JSON.stringify(system.tree()));
        return;
      case '/tree.txt':
        response.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' }).end(`${system.renderTree()}\n`);
        return;
      case '/events':
        streamEvents(system, request, response, heartbeatMs);
        return;
      case '/metrics':
        metrics.registry.metrics().then(
          (text) => response.writeHead(200, { 'content-type': metrics.registry.contentType, 'cache-control': 'no-store' }).end(text),
          (err: unknown) => {
            system.logger.error({ err }, 'inspection endpoint: collecting metrics failed');
            response.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'collecting metrics failed', reason: summarizeError(err) }));
          },
        );
        return;
    }
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const url = `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
  let closing: Promise<void> | undefined;
  return {
    url,
    registry,
    attach(system: ActorSystem, sources: InspectionSources = {}): void {
      if (closed) throw new ActorStoppedError(`inspection endpoint ${url} is closed`);
      if (attached !== undefined) throw new InvalidArgumentError(`inspection endpoint ${url} already serves system ${attached.system.name}`);
      const metrics = createInspectionMetrics(system, {
        registry,
        ...(sources.flow ? { flow: sources.flow } : {}),
        ...(sources.topicFlow ? { topicFlow: sources.topicFlow } : {}),
        ...(sources.processMetrics ? { processMetrics: true } : {}),
      });
      attached = { system, metrics };
    },
    close(): Promise<void> {
      closed = true;
      closing ??= new Promise<void>((resolve) => {
        attached?.metrics.close();
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

/** Writes lifecycle events as SSE until the client goes away or the system terminates. */
function streamEvents(system: ActorSystem, request: IncomingMessage, response: ServerResponse, heartbeatMs: number): void {
  response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive' });
  if (request.method === 'HEAD') {
    response.end();
    return;
  }
  // retry: how long an EventSource waits before reconnecting after the stream ends (ms).
  response.write(': shardflow lifecycle events\nretry: 2000\n\n');
  const heartbeat = setInterval(() => response.write(': keep-alive\n\n'), heartbeatMs);
  heartbeat.unref();
  const subscription = system.events$.subscribe({
    next: (event: LifecycleEvent) => {
      const data = 'reason' in event ? { ...event, reason: summarizeError(event.reason) } : event;
      response.write(`event: ${event.type}\ndata: ${JSON.stringify(data)}\n\n`);
    },
    complete: () => {
      clearInterval(heartbeat);
      response.end();
    },
  });
  request.once('close', () => {
    clearInterval(heartbeat);
    subscription.unsubscribe();
  });
}
