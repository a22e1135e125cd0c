import { InvalidArgumentError, type Command } from 'commander';
import { listenInspection, type InspectionEndpoint } from '../index.js';
import type { WebIndex } from '../topology/webIndex.js';
import { portNumber } from './options.js';

/** Help text of `--inspect-port` (shared by `demo` and `rank`). */
export const INSPECT_PORT_HELP = 'serve the operator console (/), /tree, /events and /metrics on this port while the job runs (0: any free port)';
/** Help text of `--inspect-host`. */
export const INSPECT_HOST_HELP = 'interface for --inspect-port; the endpoint has no authentication, so keep it on loopback';

/** Parses `--inspect-port`: an integer in 0..65535. @throws commander's InvalidArgumentError */
export function inspectPort(value: string): number {
  return portNumber(value);
}

/** The parsed inspection options of a job command. */
export interface InspectOptions {
  /** `--inspect-port`; undefined: no endpoint. */
  readonly inspectPort?: number;
  /** `--inspect-host`, default `'127.0.0.1'`. */
  readonly inspectHost?: string;
}

/** The endpoint of one job run; see {@link openInspection}. */
export interface JobInspection {
  /** Base URL, e.g. `http://127.0.0.1:9464`. */
  readonly url: string;
  /** Starts serving `index`: its tree and events, `FlowCounters` and per-topic counts on `/metrics`. */
  attach(index: WebIndex): void;
  /** Stops the endpoint. Idempotent. */
  close(): Promise<void>;
}

/**
 * Binds the inspection endpoint of a job when `--inspect-port` was given, before the job starts,
 * so that a taken port stops the command at once, and prints where to look (stdout). The job then
 * calls `attach(index)` from its `onStarted` callback; until then the endpoint answers 503.
 *
 * @param command the job's command: a listen error (e.g. `EADDRINUSE`) ends the process through
 *   `command.error()` with exit code 1 and a one-line message instead of a stack trace
 * @returns `undefined` when `--inspect-port` was not given
 */
export async function openInspection(options: InspectOptions, command: Command): Promise<JobInspection | undefined> {
  if (options.inspectPort === undefined) return undefined;
  const host = options.inspectHost ?? '127.0.0.1';
  let endpoint: InspectionEndpoint;
  try {
    endpoint = await listenInspection({ host, port: options.inspectPort });
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    const taken = code === 'EADDRINUSE' ? `: another process listens there; give another port, or 0 for any free one` : '';
    command.error(`--inspect-port ${options.inspectPort} on ${host}: ${(err as Error).message}${typeof code === 'string' && !(err as Error).message.includes(code) ? ` (${code})` : ''}${taken}`, { exitCode: 1, code: 'shardflow.inspect' });
  }
  console.log(`inspection: ${endpoint.url}/ (console), ${endpoint.url}/metrics; in a terminal: npx shardflow tree --url ${endpoint.url} --watch`);
  return {
    url: endpoint.url,
    attach(index: WebIndex): void {
      endpoint.attach(index.system, { flow: index.counters, topicFlow: index.topicFlow, processMetrics: true });
    },
    close: () => endpoint.close(),
  };
}
