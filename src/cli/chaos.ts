import { InjectedFaultError } from '../errors.js';
import { seededRandom } from '../runtime/supervision/seededRandom.js';

/**
 * `--chaos RATE`: a `beforeReceive` hook that fails the message about to be processed with
 * probability `rate`, by throwing `InjectedFaultError`, so that supervisors restart the
 * actor. Seeded, so a run can be repeated. Only the web-index actors are hit (partition
 * children and crawlers), never the supervisors.
 */
export function chaosInjector(rate: number, seed = 42): (path: string, kind: string) => void {
  if (!(rate >= 0 && rate <= 1)) throw new RangeError(`chaos rate must be in [0, 1], got ${rate}`);
  const random = seededRandom(seed);
  let injected = 0;
  return (path, kind) => {
    if (!/^(crawl-policy|indexer|backlinks|metrics|crawler)$/.test(kind)) return;
    if (random() < rate) throw new InjectedFaultError(`chaos: fault #${++injected} injected into ${path}`);
  };
}
