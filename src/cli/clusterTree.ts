import pc from 'picocolors';
import type { ClusterStatus, TreeNode } from '../index.js';
import { readCluster, type ClusterReadOptions } from './cluster.js';
import { renderTreeForTerminal } from './tree.js';

/** One worker's supervision tree, or why it could not be read. */
export type WorkerTree = { readonly tree: TreeNode } | { readonly error: string };

/**
 * Reads the cluster's status and, from each live worker that publishes a console URL in its
 * membership record (`shardflow worker --inspect-port`), its supervision tree (`GET /tree`).
 * A worker that does not answer gets its error instead of a tree.
 */
export async function readClusterTrees(opts: ClusterReadOptions, signal?: AbortSignal): Promise<{ status: ClusterStatus; trees: Map<string, WorkerTree> }> {
  const status = await readCluster(opts);
  const trees = new Map<string, WorkerTree>();
  await Promise.all(
    status.workers.map(async (w) => {
      if (!w.inspectUrl) {
        trees.set(w.id, { error: 'no console (start it with --inspect-port)' });
        return;
      }
      try {
        const r = await fetch(`${w.inspectUrl}/tree`, { signal: signal ?? AbortSignal.timeout(5000) });
        if (!r.ok) throw new Error(`GET ${w.inspectUrl}/tree answered ${r.status} ${r.statusText}`);
        trees.set(w.id, { tree: (await r.json()) as TreeNode });
      } catch (err) {
        trees.set(w.id, { error: `${w.inspectUrl}: ${(err as Error).message}` });
      }
    }),
  );
  return { status, trees };
}

/**
 * The text of `shardflow tree --cluster`: the cluster's summary line, then for each worker a
 * header (id, host, pid, leader, console URL), one line per partition unit it holds the lease
 * of (`count/3 epoch 2 running lag 12`: the lease epoch, the state, the backlog of the stage's
 * subscription on the partition's input, `-` unknown), and its supervision tree as `shardflow
 * tree` prints it (restarts, mailboxes), indented. Units nobody holds are listed last.
 */
export function renderClusterTree(status: ClusterStatus, trees: ReadonlyMap<string, WorkerTree>, options: { color: boolean; filter?: string; at?: number }): string {
  const c = pc.createColors(options.color);
  const states = new Map<string, number>();
  for (const p of status.partitions) states.set(p.state, (states.get(p.state) ?? 0) + 1);
  const out = [
    `${c.bold(`cluster ${status.cluster}`)}: ${status.workers.length} workers, ${status.partitions.length} partitions (${[...states].map(([k, n]) => `${n} ${k}`).join(', ') || 'none'})` +
      (options.at !== undefined ? c.dim(`  ${new Date(options.at).toLocaleTimeString()}`) : ''),
  ];
  const unitLine = (p: ClusterStatus['partitions'][number]): string => {
    const state = p.state === 'running' ? c.green(p.state) : p.state === 'opening' ? c.blue(p.state) : c.red(p.state);
    const lag = p.backlog === undefined ? '-' : String(p.backlog);
    return `${p.unit} epoch ${p.epoch} ${state} lag ${p.backlog ? c.cyan(lag) : lag}${p.reason ? ` ${c.red(p.reason)}` : ''}`;
  };
  for (const w of status.workers) {
    const leader = status.leader?.worker === w.id ? ` ${c.yellow('leader')}` : '';
    out.push('', `${c.bold(`worker ${w.id}`)} (${w.host} pid ${w.pid})${leader} ${c.dim(w.inspectUrl ?? 'no console')}`);
    for (const p of status.partitions.filter((q) => q.owner === w.id)) out.push(`  ${unitLine(p)}`);
    for (const [unit, reason] of Object.entries(w.failed)) out.push(`  ${unit} ${c.red('refused')}: ${reason}`);
    const t = trees.get(w.id);
    if (!t || 'error' in t) out.push(`  ${c.red(`(tree unavailable: ${t?.error ?? 'not read'})`)}`);
    else out.push(...renderTreeForTerminal(t.tree, { color: options.color, ...(options.filter ? { filter: options.filter } : {}) }).split('\n').map((l) => `  ${l}`));
  }
  const unowned = status.partitions.filter((p) => p.owner === undefined || !status.workers.some((w) => w.id === p.owner));
  if (unowned.length > 0) out.push('', c.bold('not held by a live worker'), ...unowned.map((p) => `  ${unitLine(p)}`));
  return out.join('\n');
}
