import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ActorSystem } from '../actor/system.js';
import { InvalidArgumentError } from '../../errors.js';
import { summarizeError, type LifecycleEvent } from '../inspection.js';

/** Options of {@link startInspectionServer}. */
export interface InspectionServerOptions {
  /** Interface to bind. Default `'127.0.0.1'`: the endpoint has no authentication, keep it local. */
  readonly host?: string;
  /** TCP port, 0..65535; default 0 (an ephemeral port, see {@link InspectionServer.url}). */
  readonly port?: number;
}

/** A running inspection endpoint. */
export interface InspectionServer {
  /** Base URL, e.g. `http://127.0.0.1:40123`. */
  readonly url: string;
  /** Stops listening and ends open event streams. Idempotent. */
  close(): Promise<void>;
}

/**
 * Serves the live supervision view of `system` over HTTP, read-only, from the same two sources as
 * the CLI (`tree()` and `events$`):
 *
 * - `GET /tree`: the {@link TreeNode} snapshot as JSON;
 * - `GET /tree.txt`: `system.renderTree()` as text;
 * - `GET /events`: Server-Sent Events, one per lifecycle event (`event:` the type, `data:` the
 *   event as JSON with `reason` summarised as `{ name, message, code? }`); the stream ends when
 *   the system has terminated.
 *
 * Other paths answer 404, other methods 405.
 * @throws (rejects) `InvalidArgumentError` for a bad port; the `listen` error (e.g. `EADDRINUSE`).
 */
export async function startInspectionServer(system: ActorSystem, options: InspectionServerOptions = {}): Promise<InspectionServer> {
  const host = options.host ?? '127.0.0.1';
  const port = options.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new InvalidArgumentError(`port must be an integer in 0..65535, got ${port}`);

  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'application/json' }).end('{"error":"method not allowed"}');
      return;
    }
    const path = new URL(request.url ?? '/', 'http://localhost').pathname;
    switch (path) {
      case '/tree':
        response.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' }).end(JSON.stringify(system.tree()));
        return;
      case '/tree.txt':
        response.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' }).end(`${system.renderTree()}\n`);
        return;
      case '/events':
        streamEvents(system, request, response);
        return;
      default:
        response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found","paths":["/tree","/tree.txt","/events"]}');
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
    close(): Promise<void> {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

/** Writes lifecycle events as SSE until the client goes away or the system terminates. */
function streamEvents(system: ActorSystem, request: IncomingMessage, response: ServerResponse): void {
  response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive' });
  response.write(': shardflow lifecycle events\n\n');
  const subscription = system.events$.subscribe({
    next: (event: LifecycleEvent) => {
      const data = 'reason' in event ? { ...event, reason: summarizeError(event.reason) } : event;
      response.write(`event: ${event.type}\ndata: ${JSON.stringify(data)}\n\n`);
    },
    complete: () => response.end(),
  });
  request.once('close', () => subscription.unsubscribe());
}
