import { InvalidArgumentError } from '../../../errors.js';
import { checkActorName } from '../../actor/checkActorName.js';
import { isSupervisorSpec, type ChildSpec } from '../childSpec.js';

/**
 * Validates a supervisor's child specs, recursively, before any actor is created: names valid and
 * unique among siblings, each plain spec has a behaviour with `kind`, `start` and `receive`.
 * @throws `InvalidArgumentError` naming the first offending spec.
 */
export function checkChildSpecs(specs: readonly ChildSpec[], where: string): void {
  if (!Array.isArray(specs)) throw new InvalidArgumentError(`children of ${where} must be an array`);
  const seen = new Set<string>();
  for (const spec of specs) {
    checkActorName(spec.name);
    if (seen.has(spec.name)) throw new InvalidArgumentError(`duplicate child name ${JSON.stringify(spec.name)} under ${where}`);
    seen.add(spec.name);
    if (isSupervisorSpec(spec)) {
      checkChildSpecs(spec.children, `${where}/${spec.name}`);
    } else {
      const b = spec.behavior as Partial<typeof spec.behavior> | undefined;
      if (typeof b?.kind !== 'string' || typeof b.start !== 'function' || typeof b.receive !== 'function') {
        throw new InvalidArgumentError(`child ${JSON.stringify(spec.name)} under ${where} needs a behavior with kind, start and receive`);
      }
    }
  }
}
