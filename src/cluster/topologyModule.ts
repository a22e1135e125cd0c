import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { InvalidArgumentError } from '../errors.js';
import { Topology, type StageTypes } from '../runtime/topology/topology.js';
import type { ClusterApplication } from './application.js';
import { topologyApplication } from './topologyApplication.js';

/** A value that behaves as a `Topology` (a module may hold another copy of the framework, where `instanceof` fails). */
function isTopology(value: unknown): value is Topology<Record<string, StageTypes>> {
  if (value instanceof Topology) return true;
  const v = value as { name?: unknown; stages?: unknown; describe?: unknown; start?: unknown } | null;
  return typeof v === 'object' && v !== null && typeof v.name === 'string' && Array.isArray(v.stages) && typeof v.describe === 'function' && typeof v.start === 'function';
}

/** A value that behaves as a `ClusterApplication`: a name, stages and `startHost`. */
function isClusterApplication(value: unknown): value is ClusterApplication {
  const v = value as { name?: unknown; stages?: unknown; startHost?: unknown } | null;
  return typeof v === 'object' && v !== null && !isTopology(v) && typeof v.name === 'string' && Array.isArray(v.stages) && typeof v.startHost === 'function';
}

const TSX_REGISTERED = Symbol.for('shardflow.tsxRegistered');

/**
 * Registers tsx's loader (once per process) when `file` is TypeScript and no one has: the
 * compiled CLI (dist/) starts without it, bin/shardflow.mjs registers it when it runs the
 * sources and marks `globalThis[Symbol.for('shardflow.tsxRegistered')]`.
 */
async function ensureTypeScriptLoader(file: string): Promise<void> {
  const g = globalThis as Record<symbol, unknown>;
  if (!/\.[cm]?tsx?$/.test(file) || g[TSX_REGISTERED] === true) return;
  const { register } = await import('tsx/esm/api');
  register();
  g[TSX_REGISTERED] = true;
}

/** What a loader accepts: only a Topology, or a Topology or a ClusterApplication (either also from a factory function). */
type Accepts = 'topology' | 'application';

/**
 * Loads export `exportName` of the ES module `file` and resolves a factory; the one loader
 * behind `loadTopology` and `loadClusterApplication`.
 * @throws InvalidArgumentError as those say
 */
async function loadExport(file: string, exportName: string, accepts: Accepts): Promise<Topology<Record<string, StageTypes>> | ClusterApplication> {
  const what = accepts === 'topology' ? 'topology' : 'application';
  const fits = (v: unknown) => isTopology(v) || (accepts === 'application' && isClusterApplication(v));
  const url = pathToFileURL(resolve(file)).href;
  let mod: Record<string, unknown>;
  try {
    await ensureTypeScriptLoader(file);
    mod = (await import(url)) as Record<string, unknown>;
  } catch (err) {
    throw new InvalidArgumentError(`cannot load the ${what} module ${file}: ${(err as Error).message}`, { cause: err });
  }
  const candidates = Object.keys(mod).filter((k) => fits(mod[k]) || typeof mod[k] === 'function');
  if (!(exportName in mod)) {
    throw new InvalidArgumentError(
      `${file} has no export ${JSON.stringify(exportName)}: export the ${accepts === 'topology' ? 'Topology' : 'Topology or ClusterApplication'} as default, or name its export with --export (its exports: ${Object.keys(mod).join(', ') || 'none'})`,
    );
  }
  let value = mod[exportName];
  if (typeof value === 'function' && !fits(value)) {
    try {
      value = await (value as () => unknown)();
    } catch (err) {
      throw new InvalidArgumentError(`the factory ${exportName} of ${file} threw: ${(err as Error).message}`, { cause: err });
    }
  }
  if (!fits(value)) {
    const expected = accepts === 'topology'
      ? 'a Topology (Topology.create(...).stage(...)) nor a function returning one'
      : 'a Topology (Topology.create(...).stage(...)), a ClusterApplication (name, stages, startHost) nor a function returning one';
    throw new InvalidArgumentError(`export ${JSON.stringify(exportName)} of ${file} is not ${expected}; candidates: ${candidates.join(', ') || 'none'}`);
  }
  return value as Topology<Record<string, StageTypes>> | ClusterApplication;
}

/**
 * Loads the topology a worker runs from an ES module.
 *
 * The convention: the module's **default export** is the `Topology`, or, with `exportName`,
 * the export of that name. The export may also be a function of no arguments returning the
 * `Topology` (or a promise of it), for a module that builds it on demand. A `.ts` module
 * loads through tsx, registered for it when the process has not (the compiled CLI).
 * `loadClusterApplication` also accepts a `ClusterApplication`.
 *
 * @param file path of the module, relative to the current directory or absolute
 * @param exportName the export to use (default `default`)
 * @throws InvalidArgumentError when the module cannot be loaded, has no such export, or the
 *   export is not a topology (the message names the exports that are)
 */
export async function loadTopology(file: string, exportName = 'default'): Promise<Topology<Record<string, StageTypes>>> {
  return (await loadExport(file, exportName, 'topology')) as Topology<Record<string, StageTypes>>;
}

/**
 * Loads what a cluster worker runs from an ES module (`shardflow worker --topology FILE`):
 * the export `exportName` (default `default`) is a `Topology` (run as
 * `topologyApplication(topology)`), a `ClusterApplication`, or a function of no arguments
 * returning either (or a promise of it). A `.ts` module loads through tsx (registered on
 * demand).
 *
 * @param file path of the module, relative to the current directory or absolute
 * @param exportName the export to use (default `default`)
 * @returns the application (a Topology's is `topologyApplication(topology)`)
 * @throws InvalidArgumentError when the module cannot be loaded, has no such export, or the
 *   export is none of those (the message names the candidate exports)
 */
export async function loadClusterApplication(file: string, exportName = 'default'): Promise<ClusterApplication> {
  const value = await loadExport(file, exportName, 'application');
  return isTopology(value) ? topologyApplication(value) : value;
}
