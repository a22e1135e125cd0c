import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Command, InvalidArgumentError } from 'commander';
import { hostHeaderCheck, isLoopbackName } from '../index.js';
import { withClusterReadOptions, type ClusterReadOptions } from './cluster.js';
import { readClusterTrees, renderClusterTree } from './clusterTree.js';
import { portNumber } from './options.js';

/** A running cluster console (`shardflow cluster console`). */
export interface ClusterConsole {
  /** `http://host:port`. */
  readonly url: string;
  close(): Promise<void>;
}

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>shardflow cluster</title>
<style>body{font:13px/1.35 ui-monospace,monospace;margin:1em;background:#111;color:#ddd}pre{white-space:pre}</style></head>
<body><pre id="tree">loading…</pre>
<script>
async function draw() {
  try {
    const r = await fetch('cluster.txt', { cache: 'no-store' });
    document.getElementById('tree').textContent = await r.text();
  } catch (e) {
    document.getElementById('tree').textContent = 'cannot read the cluster: ' + e;
  }
  setTimeout(draw, 1000);
}
draw();
</script></body></html>`;

/**
 * One console for a whole cluster: serves, on `host:port` (loopback by default),
 * - `GET /cluster`: JSON `{ status, trees }`: the cluster's status (`ClusterStatus`: workers,
 *   partitions, owners, lease epochs, states, backlogs) and each live worker's supervision tree
 *   (`GET /tree` of its own console, published in its membership record) or why it could not
 *   be read;
 * - `GET /cluster.txt`: the same as `shardflow tree --cluster` prints (no colour);
 * - `GET /`: a page that redraws that text every second.
 * Each request reads the cluster anew. Requests whose `Host` header names neither a loopback
 * name, the bound address nor an `allowedHosts` entry are refused (403: DNS rebinding).
 * @throws InvalidArgumentError for a non-loopback `host` (the console has no authentication)
 */
export async function startClusterConsole(opts: ClusterReadOptions & { readonly host?: string; readonly port?: number; readonly allowedHosts?: readonly string[] }): Promise<ClusterConsole> {
  const host = opts.host ?? '127.0.0.1';
  if (!isLoopbackName(host)) throw new InvalidArgumentError(`the cluster console has no authentication: bind it to a loopback address, not ${host}`);
  const check = hostHeaderCheck({ bindHost: host, allowedHosts: opts.allowedHosts ?? [] });
  const server = createServer((req, res) => void answer(req, res));
  const answer = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const refused = check(req.headers.host);
    if (refused) return send(res, 403, 'text/plain', refused);
    // HEAD as GET without the body (Node sends none for HEAD), as the job's endpoint answers it.
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD');
      return send(res, 405, 'text/plain', 'GET or HEAD only');
    }
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    try {
      if (path === '/') return send(res, 200, 'text/html; charset=utf-8', PAGE);
      if (path !== '/cluster' && path !== '/cluster.txt') return send(res, 404, 'text/plain', 'paths: /, /cluster, /cluster.txt');
      const { status, trees } = await readClusterTrees(opts);
      if (path === '/cluster') return send(res, 200, 'application/json', JSON.stringify({ status, trees: Object.fromEntries(trees) }));
      return send(res, 200, 'text/plain; charset=utf-8', renderClusterTree(status, trees, { color: false, at: Date.now() }));
    } catch (err) {
      return send(res, 503, 'text/plain', `cannot read the cluster: ${(err as Error).message}`);
    }
  };
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, resolve);
  });
  const address = server.address() as AddressInfo;
  return {
    url: `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
  res.end(body);
}

/** `shardflow cluster console`: {@link startClusterConsole} until SIGINT or SIGTERM. */
export function clusterConsoleCommand(): Command {
  return withClusterReadOptions(new Command('console').description("serve one console for the whole cluster (its status and every worker's tree) until interrupted"))
    .option('--host <address>', 'loopback address to listen on', '127.0.0.1')
    .option('--port <port>', 'port (0: any free port)', portNumber, 9470)
    .action(async (opts: ClusterReadOptions & { host: string; port: number }) => {
      const console_ = await startClusterConsole(opts);
      process.stdout.write(`cluster console on ${console_.url}\n`);
      await new Promise<void>((resolve) => {
        process.once('SIGINT', resolve);
        process.once('SIGTERM', resolve);
      });
      await console_.close();
    });
}
