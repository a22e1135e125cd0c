import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { InvalidArgumentError } from '../errors.js';
import { Topology, type StageTypes } from '../runtime/topology/topology.js';

/** A value that behaves as a `Topology` (a module may hold another copy of the framework, where `instanceof` fails). */
function isTopology(value: unknown): value is Topology<Record<string, StageTypes>> {
  if (value instanceof Topology) return true;
  const v = value as { name?: unknown; stages?: unknown; describe?: unknown; start?: unknown } | null;
  return typeof v === 'object' && v !== null && typeof v.name === 'string' && Array.isArray(v.stages) && typeof v.describe === 'function' && typeof v.start === 'function';
}

/**
 * Loads the topology a worker runs from an ES module (`shardflow worker --topology FILE`).
 *
 * The convention: the module's **default export** is the `Topology`, or, with `exportName`,
 * the export of that name. The export may also be a function of no arguments returning the
 * `Topology` (or a promise of it), for a module that builds it on demand. A `.ts` module
 * loads when the process runs under tsx (as `bin/shardflow.mjs` does).
 *
 * @param file path of the module, relative to the current directory or absolute
 * @param exportName the export to use (default `default`)
 * @throws InvalidArgumentError when the module cannot be loaded, has no such export, or the
 *   export is not a topology (the message names the exports that are)
 */
export async function loadTopology(file: string, exportName = 'default'): Promise<Topology<Record<string, StageTypes>>> {
  const url = pathToFileURL(resolve(file)).href;
  let mod: Record<string, unknown>;
  try {
    mod = (await import(url)) as Record<string, unknown>;
  } catch (err) {
    throw new InvalidArgumentError(`cannot load the topology module ${file}: ${(err as Error).message}`, { cause: err });
  }
  const topologies = Object.keys(mod).filter((k) => isTopology(mod[k]) || typeof mod[k] === 'function');
  if (!(exportName in mod)) {
    throw new InvalidArgumentError(
      `${file} has no export ${JSON.stringify(exportName)}: export the Topology as default, or name its export with --export (its exports: ${Object.keys(mod).join(', ') || 'none'})`,
    );
  }
  let value = mod[exportName];
  if (typeof value === 'function' && !isTopology(value)) {
    try {
      value = await (value as () => unknown)();
    } catch (err) {
      throw new InvalidArgumentError(`the factory ${exportName} of ${file} threw: ${(err as Error).message}`, { cause: err });
    }
  }
  if (!isTopology(value)) {
    throw new InvalidArgumentError(`export ${JSON.stringify(exportName)} of ${file} is not a Topology (Topology.create(...).stage(...)) nor a function returning one; candidates: ${topologies.join(', ') || 'none'}`);
  }
  return value;
}
