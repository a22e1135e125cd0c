import type { LinkFeatures, LinkOp, Outlink } from '../messages.js';
import { featuresKey } from './linkValue.js';

/**
 * The link operations that turn a page's stored outlinks into its new ones:
 * `add` for a new target, `remove` for a target no longer linked, `update` for a target
 * whose features changed. Targets are compared as canonical URL strings.
 *
 * @param source the page's URL
 * @param before stored outlinks: target -> features
 * @param after the new outlinks (distinct targets)
 */
export function diffOutlinks(source: string, before: ReadonlyMap<string, LinkFeatures>, after: readonly Outlink[]): LinkOp[] {
  const ops: LinkOp[] = [];
  const kept = new Set<string>();
  for (const { target, features } of after) {
    kept.add(target);
    const old = before.get(target);
    if (!old) ops.push({ op: 'add', source, target, features });
    else if (!sameFeatures(old, features)) ops.push({ op: 'update', source, target, features });
  }
  for (const target of before.keys()) if (!kept.has(target)) ops.push({ op: 'remove', source, target });
  return ops;
}

function sameFeatures(a: LinkFeatures, b: LinkFeatures): boolean {
  return featuresKey(a) === featuresKey(b);
}
