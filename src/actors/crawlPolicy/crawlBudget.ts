import { InvalidArgumentError } from '../../index.js';

/**
 * The most crawl requests the crawl policies of one process may send (`--max-pages`),
 * shared by all of them. A policy takes one unit per page request (robots.txt fetches are
 * not counted); when none is left it keeps URLs queued in the frontier, unrequested, and
 * the crawl becomes quiet. Not persisted: a new process starts with a full budget.
 */
export class CrawlBudget {
  #used = 0;

  /** @throws InvalidArgumentError unless `limit` is an integer >= 0 or Infinity */
  constructor(readonly limit: number) {
    if (!(limit === Infinity || (Number.isInteger(limit) && limit >= 0))) throw new InvalidArgumentError(`crawl budget must be an integer >= 0, got ${limit}`);
  }

  /** Units taken so far. */
  get used(): number {
    return this.#used;
  }

  /** True while units are left. */
  get available(): boolean {
    return this.#used < this.limit;
  }

  /** Takes one unit. @returns false (and takes nothing) when none is left */
  take(): boolean {
    if (this.#used >= this.limit) return false;
    this.#used++;
    return true;
  }
}
