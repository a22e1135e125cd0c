import { Command, InvalidArgumentError } from 'commander';
import pc from 'picocolors';
import { readEventStream, type ActorStatus, type TreeNode } from '../index.js';
import { positiveInt } from './options.js';
import { withClusterReadOptions, type ClusterReadOptions } from './cluster.js';
import { readClusterTrees, renderClusterTree } from './clusterTree.js';

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
  /** Show only actors whose path contains this text, with their ancestors; totals stay over the whole tree. */
  readonly filter?: string;
  /**
   * Terminal width in columns: longer lines are cut to it, ending with `…` (a wrapped line would
   * break an in-place redraw). Default: no cut beyond the 100-character error limit.
   */
  readonly width?: number;
}

/** A run of text and how to colour it; a line is a list of pieces, so it can be cut by visible width. */
type Piece = readonly [text: string, paint: (text: string) => string];

/** Joins `pieces`, painted, cut to `width` visible characters with a final `…`. */
function joinPieces(pieces: readonly Piece[], width: number | undefined): string {
  let out = '';
  let used = 0;
  for (const [text, paint] of pieces) {
    if (width !== undefined && used + text.length > width) {
      const room = width - used;
      return room >= 1 ? out + paint(`${text.slice(0, room - 1)}…`) : out;
    }
    out += paint(text);
    used += text.length;
  }
  return out;
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
  const plain = (text: string): string => text;
  const lines: Piece[][] = [];
  const byStatus = new Map<ActorStatus, number>();
  let actors = 0;
  let restarts = 0;
  const count = (node: TreeNode): void => {
    actors++;
    restarts += node.restarts;
    byStatus.set(node.status, (byStatus.get(node.status) ?? 0) + 1);
    for (const child of node.children) count(child);
  };
  count(root);
  const filter = options.filter ?? '';
  /** Whether `node` or one of its descendants matches the filter. */
  const shown = (node: TreeNode): boolean => node.path.includes(filter) || node.children.some(shown);
  const visit = (node: TreeNode, depth: number): void => {
    if (filter !== '' && !shown(node)) return;
    const name = depth === 0 ? node.path : node.path.slice(node.path.lastIndexOf('/') + 1);
    const line: Piece[] = [
      ['  '.repeat(depth), plain],
      [name, c.bold],
      [' ', plain],
      [`[${node.kind}]`, c.dim],
      [' ', plain],
      [node.status, c[STATUS_COLOR[node.status]]],
      [' ', plain],
      [`restarts=${node.restarts}`, node.restarts > 0 ? c.yellow : plain],
      [' ', plain],
      [`mailbox=${node.mailboxDepth}`, node.mailboxDepth > 0 ? c.cyan : plain],
      [` processed=${node.processed}`, plain],
    ];
    if (node.dropped > 0) line.push([' ', plain], [`dropped=${node.dropped}`, c.red]);
    if (node.lastError !== undefined) {
      const text = `${node.lastError.code ?? node.lastError.name}: ${node.lastError.message}`;
      line.push([' ', plain], [text.length > MAX_ERROR_CHARS ? `${text.slice(0, MAX_ERROR_CHARS - 1)}…` : text, c.red]);
    }
    lines.push(line);
    for (const child of node.children) visit(child, depth + 1);
  };
  visit(root, 0);
  const header: Piece[] = [];
  if (options.source !== undefined) header.push([options.source, c.bold], ['  ', plain]);
  header.push([`${actors} actors: `, plain]);
  [...byStatus].forEach(([status, n], i) => header.push([i === 0 ? '' : ', ', plain], [`${n} ${status}`, c[STATUS_COLOR[status]]]));
  header.push(['; ', plain], [`${restarts} restarts`, restarts > 0 ? c.yellow : plain]);
  if (filter !== '') header.push([`; ${lines.length} shown for ${JSON.stringify(filter)}`, plain]);
  if (options.at !== undefined) header.push([`  ${new Date(options.at).toLocaleTimeString()}`, c.dim]);
  return [header, ...lines].map((pieces) => joinPieces(pieces, options.width)).join('\n');
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
  /** See {@link TerminalTreeOptions.filter}. */
  readonly filter?: string;
  /**
   * With `watch`, the terminal's height in lines: a taller frame is cut to fit, ending with a line
   * that says how many lines were left out (a frame taller than the screen would scroll and break
   * the in-place redraw). Default: no limit.
   */
  readonly maxLines?: number;
  /** With `watch`, the terminal's width in columns (see {@link TerminalTreeOptions.width}). */
  readonly width?: number;
  /**
   * Whether `write` goes to a terminal (stdout's `isTTY`). With `watch`, a terminal gets each
   * frame redrawn in place with ANSI cursor codes, cut to `maxLines` and `width`; anything else (a
   * file, a pipe) gets the frames one after another, a blank line between them, uncut and with no
   * control codes, as `watch` and `top -b` print. Default: false.
   */
  readonly terminal?: boolean;
}

/** Cursor home; each line then ends with erase-to-end-of-line, the frame with erase-below: no flicker. */
const HOME = '\x1b[H';
const ERASE_LINE = '\x1b[K';
const ERASE_BELOW = '\x1b[J';

/** Writes the frames of a watch, see {@link frameWriter}. */
interface FrameWriter {
  /** Writes `text` (lines joined with `\n`, no trailing newline) as the next frame. */
  frame(text: string): void;
  /** Writes a line under the last frame, e.g. why it could not be refreshed. */
  note(text: string): void;
}

/**
 * Frames of a watch written to `write`: on a terminal, each over the last in place (cursor home,
 * each line erased to its end, the rest of the screen erased below: no flicker, no scrolling);
 * elsewhere (a file, a pipe) one after another, a blank line between them, with no control codes
 * (each frame's header line has the time).
 */
function frameWriter(write: (text: string) => void, terminal: boolean): FrameWriter {
  let last: string | undefined;
  const inPlace = (text: string): string => `${HOME}${text.split('\n').join(`${ERASE_LINE}\n`)}${ERASE_LINE}\n${ERASE_BELOW}`;
  return {
    frame(text) {
      write(terminal ? inPlace(text) : `${last === undefined ? '' : '\n'}${text}\n`);
      last = text;
    },
    note(text) {
      // On a terminal the last frame is redrawn first, so the note sits right under it.
      write(terminal ? `${inPlace(last ?? '')}${text}\n` : `${text}\n`);
    },
  };
}

/** Why {@link runTree} stopped watching. */
export type TreeOutcome = 'printed' | 'aborted' | 'stream-ended';

/**
 * `shardflow tree`: prints the tree of the endpoint at `url` once, or with `watch` again on each
 * lifecycle event from `/events` (redraws within 50 ms share one fetch) and every `intervalMs`:
 * on a `terminal` redrawn in place (ANSI cursor-home and erase, no screen clear), elsewhere as
 * plain frames one after another.
 * @returns `'printed'` (no watch), `'aborted'` (`signal`), or `'stream-ended'` (the system
 *   terminated or the endpoint closed; the last frame stays on screen)
 * @throws (rejects) `Error` when the endpoint cannot be reached or answers other than 200
 */
export async function runTree(options: RunTreeOptions): Promise<TreeOutcome> {
  const base = options.url.replace(/\/+$/, '');
  const now = options.now ?? Date.now;
  const terminal = options.terminal ?? false;
  const fetchTree = async (): Promise<TreeNode> => {
    const response = await fetch(`${base}/tree`, { ...(options.signal ? { signal: options.signal } : {}) });
    if (!response.ok) throw new Error(`GET ${base}/tree answered ${response.status} ${response.statusText}`);
    return (await response.json()) as TreeNode;
  };
  const render = (tree: TreeNode): string =>
    renderTreeForTerminal(tree, {
      color: options.color,
      source: base,
      at: now(),
      ...(options.filter ? { filter: options.filter } : {}),
      ...(options.watch && terminal && options.width !== undefined ? { width: options.width } : {}),
    });

  if (!options.watch) {
    options.write(`${render(await fetchTree())}\n`);
    return 'printed';
  }

  const out = frameWriter(options.write, terminal);
  const draw = (tree: TreeNode): void => out.frame(terminal ? fit(render(tree), options.maxLines) : render(tree));
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
          out.note(`(cannot refresh: ${(err as Error).message})`);
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

/**
 * Cuts `frame` to `maxLines` lines (>= 2), the last one saying how many were left out;
 * unchanged when it fits or `maxLines` is undefined.
 */
function fit(frame: string, maxLines: number | undefined): string {
  if (maxLines === undefined) return frame;
  const lines = frame.split('\n');
  const room = Math.max(2, maxLines);
  if (lines.length <= room) return frame;
  const kept = lines.slice(0, room - 1);
  return [...kept, `… ${lines.length - kept.length} more lines: a taller terminal or --filter <text> shows them`].join('\n');
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

/** `shardflow tree --url URL [--watch]`, or `--cluster URL [--name CLUSTER]` for every worker of a cluster. */
export function treeCommand(setExit: (code: number) => void): Command {
  return withClusterReadOptions(
    new Command('tree')
      .description('show the supervision tree of a job started with --inspect-port (or of every worker of a cluster), coloured by state, with restarts and mailbox depths')
      .option('--url <url>', 'the inspection endpoint, e.g. http://127.0.0.1:9464 (or give --cluster)', endpointUrl),
    false,
  )
    .option('--watch', 'redraw on every lifecycle event until the job ends (Ctrl-C to stop); with --cluster, every --interval', false)
    .option('--interval <ms>', 'with --watch, also redraw every <ms> milliseconds', positiveInt, 1000)
    .option('--filter <text>', 'only actors whose path contains <text> (e.g. p3/ or indexer), with their ancestors')
    .option('--no-color', 'plain text (also when NO_COLOR is set or stdout is not a terminal)')
    .action(async (opts: { url?: string; watch: boolean; interval: number; color: boolean; filter?: string } & Partial<ClusterReadOptions>) => {
      if ((opts.url === undefined) === (opts.cluster === undefined)) throw new InvalidArgumentError('give either --url <endpoint> or --cluster <redis url>');
      const abort = new AbortController();
      const onSigint = (): void => abort.abort();
      process.once('SIGINT', onSigint);
      const terminal = process.stdout.isTTY === true;
      // picocolors also says yes on CI with stdout a pipe; plain text there as the help says (FORCE_COLOR still forces).
      const color = opts.color && pc.isColorSupported && (terminal || !!process.env.FORCE_COLOR);
      try {
        if (opts.cluster !== undefined) {
          const known = await runClusterTree({ ...(opts as ClusterReadOptions), cluster: opts.cluster }, opts, color, terminal, abort.signal);
          // As `cluster status` (found by a new user: an unknown --name exited 0 here, 1 there).
          if (!known) console.error(`shardflow tree: no cluster ${opts.name ?? ''} in ${opts.cluster} (no worker ever joined it)`);
          setExit(known ? 0 : 1);
          return;
        }
        const outcome = await runTree({
          url: opts.url!,
          watch: opts.watch,
          intervalMs: opts.interval,
          color,
          write: (text) => process.stdout.write(text),
          signal: abort.signal,
          terminal,
          ...(opts.filter ? { filter: opts.filter } : {}),
          // Leave one line for the cursor after the frame.
          ...(terminal && process.stdout.rows > 2 ? { maxLines: process.stdout.rows - 1 } : {}),
          ...(terminal && process.stdout.columns > 20 ? { width: process.stdout.columns } : {}),
        });
        if (outcome === 'stream-ended') console.log('event stream ended: the job terminated or the endpoint closed');
        setExit(0);
      } catch (err) {
        if (err instanceof InvalidArgumentError) throw err;
        const cause = (err as { cause?: { code?: string } }).cause?.code;
        console.error(`shardflow tree: cannot read ${opts.url ?? opts.cluster}: ${(err as Error).message}${cause ? ` (${cause})` : ''}`);
        setExit(1);
      } finally {
        process.off('SIGINT', onSigint);
      }
    });
}

/**
 * `tree --cluster`: prints every worker's partitions and tree once, or with `watch` every
 * `interval` ms until `signal` aborts, on a `terminal` in place (see {@link frameWriter}).
 * @returns false when no worker ever joined the cluster (no stages recorded; printed once), else true
 */
async function runClusterTree(read: ClusterReadOptions, opts: { watch: boolean; interval: number; filter?: string }, color: boolean, terminal: boolean, signal: AbortSignal): Promise<boolean> {
  let known = true;
  const frame = async (): Promise<string> => {
    const { status, trees } = await readClusterTrees(read);
    known = status.stages !== undefined;
    return renderClusterTree(status, trees, { color, at: Date.now(), ...(opts.filter ? { filter: opts.filter } : {}) });
  };
  if (!opts.watch) {
    process.stdout.write(`${await frame()}\n`);
    return known;
  }
  const out = frameWriter((text) => process.stdout.write(text), terminal);
  while (!signal.aborted) {
    out.frame(fit(await frame(), terminal && process.stdout.rows > 2 ? process.stdout.rows - 1 : undefined));
    await new Promise((resolve) => {
      const t = setTimeout(resolve, opts.interval);
      signal.addEventListener('abort', () => (clearTimeout(t), resolve(undefined)), { once: true });
    });
  }
  return true;
}
