import { InvalidArgumentError } from '../../errors.js';

/**
 * What a supervisor does with a failed child (Pekko's `SupervisorStrategy` directives, Erlang/OTP's
 * restart types):
 * - `'resume'`: keep the state, drop the failing message, go on with the next one;
 * - `'restart'`: end the incarnation (`stop()`), optionally wait a backoff, `start()` a new one; the
 *   mailbox is kept;
 * - `'stop'`: stop for good (`stop()` runs, the mailbox is dropped);
 * - `'escalate'`: leave the child suspended and fail the supervisor itself with the same error, so
 *   the supervisor's own parent decides (at the root guardian the system terminates).
 */
export type Directive = 'resume' | 'restart' | 'stop' | 'escalate';

/**
 * Which children a `restart` or `stop` directive applies to (Erlang/OTP `supervisor` strategies):
 * - `'one-for-one'`: only the failed child;
 * - `'one-for-all'`: every child of the supervisor (stopped last-started first, started in order);
 * - `'rest-for-one'`: the failed child and the children started after it.
 * `resume` and `escalate` always concern the failed child only.
 */
export type SupervisionScope = 'one-for-one' | 'one-for-all' | 'rest-for-one';

/**
 * Exponential backoff between restarts (Pekko `SupervisorStrategy.restartWithBackoff`).
 * The n-th consecutive restart (n = 0, 1, ...) waits
 * `min(maxMs, minMs * factor^n) * (1 + u * randomFactor)` ms, `u` uniform in [0, 1).
 *
 * Worked numbers, `{ minMs: 3000, maxMs: 30000, factor: 2, randomFactor: 0.2 }`: 3, 6, 12, 24, 30,
 * 30, ... s before jitter; with jitter each lies in [d, 1.2 d), e.g. 3–3.6 s then 6–7.2 s; the cap
 * applies before jitter, so the longest wait is 36 s. The count n goes back to 0 when the child
 * handled a message without failing since its last restart (as Pekko's classic
 * `BackoffSupervisor` manual reset, done by the runtime), or ran `resetAfterMs` since then
 * without failing, except after a failure that says the broker is unreachable
 * (`BrokerDisconnectedError`, in the error or its causes): then only work resets it, so a
 * broker outage backs off to `maxMs` however long each restart lives before it fails.
 *
 * Messages that arrive during the backoff stay in the mailbox and are processed by the new
 * incarnation (unlike Pekko, which drops them): a partition keeps its input across a broker outage.
 */
export interface BackoffOptions {
  /** First delay in ms, > 0. */
  readonly minMs: number;
  /** Cap on the delay before jitter, in ms, >= minMs. */
  readonly maxMs: number;
  /** Growth per consecutive restart, >= 1. */
  readonly factor: number;
  /** Jitter as a fraction of the delay, >= 0 (0 = deterministic). */
  readonly randomFactor: number;
  /** Ms of failure-free running after a restart that reset the backoff count to 0, >= 0. */
  readonly resetAfterMs: number;
}

/** Input of {@link SupervisorStrategy.withBackoff}: `factor` defaults to 2, `randomFactor` to 0.2, `resetAfterMs` to `minMs` (as Pekko's `resetBackoffAfter`). */
export interface BackoffInput {
  readonly minMs: number;
  readonly maxMs: number;
  readonly factor?: number;
  readonly randomFactor?: number;
  readonly resetAfterMs?: number;
}

/**
 * Restart intensity (Erlang/OTP `intensity`/`period`, Pekko `withLimit`): at most `maxRestarts`
 * restarts within any `withinMs` window; the failure that would need one more is escalated as
 * `RestartIntensityExceededError` (code `SF_ERR_RESTART_INTENSITY`, the failure as `cause`).
 * For one-for-one the count is per child, for one-for-all/rest-for-one per supervisor (OTP).
 */
export interface RestartLimit {
  /** Integer >= 0. */
  readonly maxRestarts: number;
  /** Window length in ms, > 0. */
  readonly withinMs: number;
}

/** An error class (matched with `instanceof`) or a stable `code` string such as `'SF_ERR_STORE_CORRUPTION'`. */
export type ErrorMatcher = string | (abstract new (...args: never[]) => unknown);

/** One decider entry: failures matching `match` get `directive`; `backoff` overrides the strategy's for restarts (`null` = restart immediately). */
export interface DeciderRule {
  readonly match: ErrorMatcher;
  readonly directive: Directive;
  readonly backoff: BackoffOptions | null | undefined;
}

/** Result of {@link SupervisorStrategy.decide}: the directive and the backoff to use if it is a restart. */
export interface Decision {
  readonly directive: Directive;
  readonly backoff: BackoffOptions | undefined;
}

interface StrategyFields {
  readonly scope: SupervisionScope;
  readonly rules: readonly DeciderRule[];
  readonly fallback: Directive;
  readonly limit: RestartLimit | undefined;
  readonly backoff: BackoffOptions | undefined;
  readonly random: (() => number) | undefined;
}

const DIRECTIVES: ReadonlySet<string> = new Set(['resume', 'restart', 'stop', 'escalate']);
const SCOPES: ReadonlySet<string> = new Set(['one-for-one', 'one-for-all', 'rest-for-one']);

/**
 * How a supervisor handles its children's failures, as an immutable value refined by copying
 * `with*`/`on` builders (after Pekko Typed's `SupervisorStrategy` and classic `OneForOneStrategy` /
 * `AllForOneStrategy`, Erlang/OTP's `supervisor` flags). Instances are frozen; every builder returns
 * a new strategy.
 *
 * Deciding: the `on(...)` rules are tried in the order they were added (first match wins: an error
 * class by `instanceof`, a string by the error's `code`), then the `fallback` directive applies.
 * The failing message is never retried (as in Pekko). Start failures with a `resume` decision stop
 * the child (as Pekko: resuming a child that has no state would loop).
 *
 * @example
 * ```ts
 * const partitionStrategy = SupervisorStrategy.oneForOne()           // fallback: restart
 *   .on('SF_ERR_STORE_CORRUPTION', 'stop')                          // never reopen a corrupt store
 *   .on(BrokerDisconnectedError, 'restart', { backoff: { minMs: 1000, maxMs: 30000 } })
 *   .withLimit(10, 60_000);                                         // 11th restart in a minute escalates
 * ```
 */
export class SupervisorStrategy {
  /** Which siblings a restart/stop applies to. */
  readonly scope: SupervisionScope;
  /** Decider rules in match order. */
  readonly rules: readonly DeciderRule[];
  /** Directive for failures no rule matches. */
  readonly fallback: Directive;
  /** Restart intensity, `undefined` = unlimited. */
  readonly limit: RestartLimit | undefined;
  /** Backoff for restarts, `undefined` = restart immediately. */
  readonly backoff: BackoffOptions | undefined;
  /** Uniform [0, 1) source for jitter; `undefined` = the system's (`ActorSystem.create({ random })`). */
  readonly random: (() => number) | undefined;

  private constructor(fields: StrategyFields) {
    this.scope = fields.scope;
    this.rules = Object.freeze([...fields.rules]);
    this.fallback = fields.fallback;
    this.limit = fields.limit;
    this.backoff = fields.backoff;
    this.random = fields.random;
    Object.freeze(this);
  }

  /** Only the failed child is affected. `fallback` defaults to `'restart'`. */
  static oneForOne(fallback: Directive = 'restart'): SupervisorStrategy {
    return SupervisorStrategy.make('one-for-one', fallback);
  }

  /** Restart/stop applies to all children of the supervisor. `fallback` defaults to `'restart'`. */
  static oneForAll(fallback: Directive = 'restart'): SupervisorStrategy {
    return SupervisorStrategy.make('one-for-all', fallback);
  }

  /** Restart/stop applies to the failed child and those started after it. `fallback` defaults to `'restart'`. */
  static restForOne(fallback: Directive = 'restart'): SupervisorStrategy {
    return SupervisorStrategy.make('rest-for-one', fallback);
  }

  /** One-for-one, always resume. */
  static readonly resume: SupervisorStrategy = SupervisorStrategy.oneForOne('resume');
  /** One-for-one, always restart immediately, no limit (Pekko `SupervisorStrategy.restart`). */
  static readonly restart: SupervisorStrategy = SupervisorStrategy.oneForOne('restart');
  /** One-for-one, always stop (Pekko Typed's default). */
  static readonly stop: SupervisorStrategy = SupervisorStrategy.oneForOne('stop');
  /** One-for-one, always escalate. */
  static readonly escalate: SupervisorStrategy = SupervisorStrategy.oneForOne('escalate');
  /**
   * The strategy of actors that name none: one-for-one restart, at most 3 restarts within 5000 ms,
   * then escalate (OTP-style intensity so a crash loop reaches the root and ends the system visibly).
   */
  static readonly default: SupervisorStrategy = SupervisorStrategy.oneForOne('restart').withLimit(3, 5000);

  /** Restart with backoff on every failure (Pekko `restartWithBackoff`); see {@link BackoffOptions}. */
  static restartWithBackoff(backoff: BackoffInput): SupervisorStrategy {
    return SupervisorStrategy.oneForOne('restart').withBackoff(backoff);
  }

  private static make(scope: SupervisionScope, fallback: Directive): SupervisorStrategy {
    checkDirective(fallback);
    return new SupervisorStrategy({ scope, rules: [], fallback, limit: undefined, backoff: undefined, random: undefined });
  }

  private copy(changes: Partial<StrategyFields>): SupervisorStrategy {
    return new SupervisorStrategy({ ...this.fields(), ...changes });
  }

  private fields(): StrategyFields {
    return {
      scope: this.scope,
      rules: this.rules,
      fallback: this.fallback,
      limit: this.limit,
      backoff: this.backoff,
      random: this.random,
    };
  }

  /**
   * Adds a decider rule after the existing ones: failures matching `match` (an error class, or a
   * `code` string) get `directive`. `options.backoff` overrides the strategy's backoff for restarts
   * decided by this rule (`null`: restart immediately).
   * @throws `InvalidArgumentError` for an unknown directive or a bad backoff.
   */
  on(match: ErrorMatcher, directive: Directive, options?: { readonly backoff?: BackoffInput | null }): SupervisorStrategy {
    checkDirective(directive);
    if (typeof match !== 'string' && typeof match !== 'function') {
      throw new InvalidArgumentError('decider match must be an error class or a code string');
    }
    const backoff = options?.backoff === undefined ? undefined : options.backoff === null ? null : toBackoff(options.backoff);
    return this.copy({ rules: [...this.rules, Object.freeze({ match, directive, backoff })] });
  }

  /** Replaces the directive for failures no rule matches. */
  withFallback(directive: Directive): SupervisorStrategy {
    checkDirective(directive);
    return this.copy({ fallback: directive });
  }

  /** Replaces the scope, keeping rules, limit and backoff. */
  withScope(scope: SupervisionScope): SupervisorStrategy {
    if (!SCOPES.has(scope)) throw new InvalidArgumentError(`unknown supervision scope ${JSON.stringify(scope)}`);
    return this.copy({ scope });
  }

  /**
   * Restart intensity: at most `maxRestarts` restarts within `withinMs`, then escalate (see {@link RestartLimit}).
   * @throws `InvalidArgumentError` unless `maxRestarts` is an integer >= 0 and `withinMs` > 0.
   */
  withLimit(maxRestarts: number, withinMs: number): SupervisorStrategy {
    if (!Number.isInteger(maxRestarts) || maxRestarts < 0) {
      throw new InvalidArgumentError(`maxRestarts must be an integer >= 0, got ${maxRestarts}`);
    }
    if (!(withinMs > 0)) throw new InvalidArgumentError(`withinMs must be > 0, got ${withinMs}`);
    return this.copy({ limit: Object.freeze({ maxRestarts, withinMs }) });
  }

  /** Removes the restart limit. */
  withoutLimit(): SupervisorStrategy {
    return this.copy({ limit: undefined });
  }

  /**
   * Exponential backoff before restarts (see {@link BackoffOptions} for the formula and numbers).
   * @throws `InvalidArgumentError` unless 0 < minMs <= maxMs, factor >= 1, randomFactor >= 0, resetAfterMs >= 0.
   */
  withBackoff(backoff: BackoffInput): SupervisorStrategy {
    return this.copy({ backoff: toBackoff(backoff) });
  }

  /** Restarts happen immediately. */
  withoutBackoff(): SupervisorStrategy {
    return this.copy({ backoff: undefined });
  }

  /** Injects the jitter source, uniform in [0, 1) (e.g. `seededRandom(42)`). */
  withRandom(random: () => number): SupervisorStrategy {
    if (typeof random !== 'function') throw new InvalidArgumentError('random must be a function');
    return this.copy({ random });
  }

  /** The directive (and restart backoff) for `error`: first matching rule, else the fallback. */
  decide(error: unknown): Decision {
    for (const rule of this.rules) {
      if (matches(rule.match, error)) {
        return { directive: rule.directive, backoff: rule.backoff === undefined ? this.backoff : rule.backoff ?? undefined };
      }
    }
    return { directive: this.fallback, backoff: this.backoff };
  }
}

function matches(match: ErrorMatcher, error: unknown): boolean {
  if (typeof match === 'string') {
    return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === match;
  }
  return error instanceof (match as abstract new (...args: never[]) => unknown);
}

function checkDirective(directive: Directive): void {
  if (!DIRECTIVES.has(directive)) throw new InvalidArgumentError(`unknown directive ${JSON.stringify(directive)}`);
}

function toBackoff(input: BackoffInput): BackoffOptions {
  const { minMs, maxMs, factor = 2, randomFactor = 0.2, resetAfterMs = input.minMs } = input;
  if (!(minMs > 0) || !(maxMs >= minMs)) {
    throw new InvalidArgumentError(`backoff needs 0 < minMs <= maxMs, got minMs=${minMs} maxMs=${maxMs}`);
  }
  if (!(factor >= 1)) throw new InvalidArgumentError(`backoff factor must be >= 1, got ${factor}`);
  if (!(randomFactor >= 0)) throw new InvalidArgumentError(`backoff randomFactor must be >= 0, got ${randomFactor}`);
  if (!(resetAfterMs >= 0)) throw new InvalidArgumentError(`backoff resetAfterMs must be >= 0, got ${resetAfterMs}`);
  return Object.freeze({ minMs, maxMs, factor, randomFactor, resetAfterMs });
}
