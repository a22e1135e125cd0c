import { Command, InvalidArgumentError } from 'commander';
import pc from 'picocolors';
import type { ActorStatus, TreeNode } from '../runtime/inspection.js';
import { readEventStream } from '../runtime/inspection/eventStream.js';
import { positiveInt } from './options.js';

/** The picocolors formatters used for states. */
type StatusColor = 'green' | 'blue' | 'yellow' | 'red' | 'gray';

/** Colour of each status: green running, blue starting, yellow restarting/backoff, red failed, grey stopping/stopped. */
const STATUS_COLOR: Readonly<Record<ActorStatus, StatusColor>> = {
  running: 'green',
  starting: 'blue',
  restarting: 'yellow',
  backoff: 'yellow',
  failed: 'red',
  stopping: 'gray',
  stopped: 'gray',
};

/** Longest error message shown on a tree line, in characters; longer ones end with `…`. */
const MAX_ERROR_CHARS = 100;

/** Options of {@link renderTreeForTerminal}. */
export interface TerminalTreeOptions {
  /** Emit ANSI colours. */
  readonly color: boolean;
  /** Shown in the header line, e.g. the endpoint URL. */
  readonly source?: string;
  /** Clock time for the header line (ms since the epoch); omitted when undefined. */
  readonly at?: number;
}

/**
 * Renders a tree snapshot for a terminal: a header line with the actor count per status and the
 * total of restarts, then one line per actor, indented two spaces per level, as
 * `name [kind] status restarts=N mailbox=N processed=N` (+ `dropped=N` when > 0, + the last
 * error), the status coloured by state and non-zero restarts in yellow:
 *
 * ```
 * 90 actors: 88 running, 2 backoff; 17 restarts
 * / [guardian] running restarts=0 mailbox=0 processed=0
 *   partitions [supervisor] running restarts=0 mailbox=0 processed=0
 *     p0 [partition] running restarts=0 mailbox=0 processed=0
 *       indexer [indexer] backoff restarts=3 mailbox=7 processed=42 SF_ERR_INJECTED_FAULT: injected fault …
 * ```
 * @returns the text, lines joined with `\n`, no trailing newline
 */
export function renderTreeForTerminal(root: TreeNode, options: TerminalTreeOptions): string {
  const c = pc.createColors(options.color);
  const lines: string[] = [];
  const byStatus = new Map<ActorStatus, number>();
  let actors = 0;
  let restarts = 0;
  const visit = (node: TreeNode, depth: number): void => {
    actors++;
    restarts += node.restarts;
    byStatus.set(node.status, (byStatus.get(node.status) ?? 0) + 1);
    const name = depth === 0 ? node.path : node.path.slice(node.path.lastIndexOf('/') + 1);
    const status = c[STATUS_COLOR[node.status]](node.status);
    const restartText = `restarts=${node.restarts}`;
    let line = `${'  '.repeat(depth)}${c.bold(name)} ${c.dim(`[${node.kind}]`)} ${status} ${node.restarts > 0 ? c.yellow(restartText) : restartText}`;
    line += ` ${node.mailboxDepth > 0 ? c.cyan(`mailbox=${node.mailboxDepth}`) : `mailbox=${node.mailboxDepth}`} processed=${node.processed}`;
    if (node.dropped > 0) line += ` ${c.red(`dropped=${node.dropped}`)}`;
    if (node.lastError !== undefined) {
      const text = `${node.lastError.code ?? node.lastError.name}: ${node.lastError.message}`;
      line += ` ${c.red(text.length > MAX_ERROR_CHARS ? `${text.slice(0, MAX_ERROR_CHARS - 1)}…` : text)}`;
    }
    lines.push(line);
    for (const child of node.children) visit(child, depth + 1);
  };
  visit(root, 0);
  const statuses = [...byStatus].map(([status, n]) => c[STATUS_COLOR[status]](`${n} ${status}`)).join(', ');
  let header = `${actors} actors: ${statuses}; ${restarts > 0 ? c.yellow(`${restarts} restarts`) : '0 restarts'}`;
  if (options.source !== undefined) header = `${c.bold(options.source)}  ${header}`;
  if (options.at !== undefined) header += c.dim(`  ${new Date(options.at).toLocaleTimeString()}`);
  return [header, ...lines].join('\n');
}

/** Options of {@link runTree}. */
export interface RunTreeOptions {
  /** Base URL of an inspection endpoint, e.g. `http://127.0.0.1:9464`. */
  readonly url: string;
  /** Keep redrawing: on each lifecycle event and every `intervalMs`, until the stream ends or `signal` aborts. */
  readonly watch: boolean;
  /** Redraw interval in watch mode, in ms (>= 1); the tree's counters change without events. */
  readonly intervalMs: number;
  readonly color: boolean;
  /** Where the text goes (stdout). */
  readonly write: (text: string) => void;
  /** Ends watch mode (Ctrl-C). */
  readonly signal?: AbortSignal;
  /** Wall clock for the header line; default `Date.now`. */
  readonly now?: () => number;
}

/** Cursor home; each line then ends with erase-to-end-of-line, the frame with erase-below: no flicker. */
const HOME = '\x1b[H';
const ERASE_LINE = '\x1b[K';
const ERASE_BELOW = '\x1b[J';

/** Why {@link runTree} stopped watching. */
export type TreeOutcome = 'printed' | 'aborted' | 'stream-ended';

/**
 * `shardflow tree`: prints the tree of the endpoint at `url` once, or with `watch` redraws it in
 * place (ANSI cursor-home and erase, no screen clear) on each lifecycle event from `/events`
 * (redraws within 50 ms share one fetch) and every `intervalMs`.
 * @returns `'printed'` (no watch), `'aborted'` (`signal`), or `'stream-ended'` (the system
 *   terminated or the endpoint closed; the last frame stays on screen)
 * @throws (rejects) `Error` when the endpoint cannot be reached or answers other than 200
 */
export async function runTree(options: RunTreeOptions): Promise<TreeOutcome> {
  const base = options.url.replace(/\/+$/, '');
  const now = options.now ?? Date.now;
  const fetchTree = async (): Promise<TreeNode> => {
    const response = await fetch(`${base}/tree`, { ...(options.signal ? { signal: options.signal } : {}) });
    if (!response.ok) throw new Error(`GET ${base}/tree answered ${response.status} ${response.statusText}`);
    return (await response.json()) as TreeNode;
  };
  const render = (tree: TreeNode): string => renderTreeForTerminal(tree, { color: options.color, source: base, at: now() });

  if (!options.watch) {
    options.write(`${render(await fetchTree())}\n`);
    return 'printed';
  }

  let lastFrame = '';
  const draw = (tree: TreeNode): void => {
    lastFrame = render(tree);
    options.write(`${HOME}${lastFrame.split('\n').join(`${ERASE_LINE}\n`)}${ERASE_LINE}\n${ERASE_BELOW}`);
  };
  draw(await fetchTree());

  // One redraw at a time; requests meanwhile fold into one more after it.
  let drawing: Promise<void> | undefined;
  let again = false;
  const redraw = (): void => {
    if (drawing !== undefined) {
      again = true;
      return;
    }
    drawing = (async () => {
      do {
        again = false;
        await new Promise((resolve) => setTimeout(resolve, 50));
        try {
          draw(await fetchTree());
        } catch (err) {
          if (options.signal?.aborted) return;
          // The endpoint went away mid-watch: keep the last frame, say why under it.
          options.write(`${HOME}${lastFrame.split('\n').join(`${ERASE_LINE}\n`)}${ERASE_LINE}\n${ERASE_BELOW}(cannot refresh: ${(err as Error).message})\n`);
        }
      } while (again && !options.signal?.aborted);
    })().finally(() => {
      drawing = undefined;
    });
  };
  const timer = setInterval(redraw, options.intervalMs);
  try {
    const response = await fetch(`${base}/events`, { headers: { accept: 'text/event-stream' }, ...(options.signal ? { signal: options.signal } : {}) });
    if (!response.ok || response.body === null) throw new Error(`GET ${base}/events answered ${response.status} ${response.statusText}`);
    for await (const _event of readEventStream(response.body)) redraw();
    return 'stream-ended';
  } catch (err) {
    if (options.signal?.aborted) return 'aborted';
    throw err;
  } finally {
    clearInterval(timer);
    await drawing;
  }
}

/** Parses `--url`: an absolute http(s) URL. @throws commander's InvalidArgumentError */
function endpointUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError(`expected an http:// URL such as http://127.0.0.1:9464, got ${JSON.stringify(value)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new InvalidArgumentError(`expected an http:// or https:// URL, got ${JSON.stringify(value)}`);
  return value;
}

/** `shardflow tree --url URL [--watch]`: the live supervision tree of a running job, in a terminal. */
export function treeCommand(setExit: (code: number) => void): Command {
  return new Command('tree')
    .description('show the supervision tree of a job started with --inspect-port, coloured by state, with restarts and mailbox depths')
    .requiredOption('--url <url>', 'the inspection endpoint, e.g. http://127.0.0.1:9464', endpointUrl)
    .option('--watch', 'redraw on every lifecycle event until the job ends (Ctrl-C to stop)', false)
    .option('--interval <ms>', 'with --watch, also redraw every <ms> milliseconds', positiveInt, 1000)
    .option('--no-color', 'plain text (also when NO_COLOR is set or stdout is not a terminal)')
    .action(async (opts: { url: string; watch: boolean; interval: number; color: boolean }) => {
      const abort = new AbortController();
      const onSigint = (): void => abort.abort();
      process.once('SIGINT', onSigint);
      try {
        const outcome = await runTree({
          url: opts.url,
          watch: opts.watch,
          intervalMs: opts.interval,
          color: opts.color && pc.isColorSupported,
          write: (text) => process.stdout.write(text),
          signal: abort.signal,
        });
        if (outcome === 'stream-ended') console.log('event stream ended: the job terminated or the endpoint closed');
        setExit(0);
      } catch (err) {
        const cause = (err as { cause?: { code?: string } }).cause?.code;
        console.error(`shardflow tree: cannot read ${opts.url}: ${(err as Error).message}${cause ? ` (${cause})` : ''}`);
        setExit(1);
      } finally {
        process.off('SIGINT', onSigint);
      }
    });
}
