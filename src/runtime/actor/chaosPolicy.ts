import { InjectedFaultError, InvalidArgumentError } from '../../errors.js';
import { seededRandom } from '../supervision/seededRandom.js';

/** Input of {@link ChaosPolicy.create}. */
export interface ChaosPolicyOptions {
  /** Probability in [0, 1] that a given `receive()` call fails. */
  readonly rate: number;
  /** PRNG seed (integer); the same seed and message order give the same faults. Default 1. */
  readonly seed?: number;
  /** Only actors of these kinds get faults; default every kind except `'supervisor'` and `'guardian'`. */
  readonly kinds?: readonly string[];
}

/**
 * Fault injection as a value (the `--chaos` switch): before each `receive()` of an eligible actor,
 * with probability `rate`, the runtime throws `InjectedFaultError` (code `SF_ERR_INJECTED_FAULT`)
 * instead of calling `receive()`. The message is then lost exactly like one whose `receive()` threw
 * (not retried), and the actor's supervisor handles the fault, so chaos exercises restarts,
 * backoff, mailbox retention and the exactly-once marks end to end.
 *
 * The unit is one `receive()` call: for actors whose messages are batches (a broker delivery of
 * 64 records), the rate is per batch. Draws come from one seeded PRNG per system, in processing
 * order, so a single-process run with the same seed and the same message order fails the same way.
 *
 * @example
 * ```ts
 * const chaos = ChaosPolicy.parse('rate=0.01,seed=7,kinds=indexer+metrics'); // from `--chaos`
 * const system = ActorSystem.create({ name: 'demo', chaos });
 * ```
 */
export class ChaosPolicy {
  /** Probability in [0, 1] per `receive()` call. */
  readonly rate: number;
  /** PRNG seed. */
  readonly seed: number;
  /** Eligible kinds, or `undefined` for all but supervisors and the guardian. */
  readonly kinds: readonly string[] | undefined;

  private constructor(rate: number, seed: number, kinds: readonly string[] | undefined) {
    this.rate = rate;
    this.seed = seed;
    this.kinds = kinds === undefined ? undefined : Object.freeze([...kinds]);
    Object.freeze(this);
  }

  /** No faults. */
  static readonly off: ChaosPolicy = new ChaosPolicy(0, 1, undefined);

  /**
   * @throws `InvalidArgumentError` unless `rate` is in [0, 1], `seed` an integer, `kinds` strings.
   */
  static create(options: ChaosPolicyOptions): ChaosPolicy {
    const { rate, seed = 1, kinds } = options;
    if (!(rate >= 0 && rate <= 1)) throw new InvalidArgumentError(`chaos rate must be in [0, 1], got ${rate}`);
    if (!Number.isInteger(seed)) throw new InvalidArgumentError(`chaos seed must be an integer, got ${seed}`);
    if (kinds !== undefined && (!Array.isArray(kinds) || kinds.some((kind) => typeof kind !== 'string' || kind.length === 0))) {
      throw new InvalidArgumentError('chaos kinds must be non-empty strings');
    }
    return new ChaosPolicy(rate, seed, kinds);
  }

  /**
   * Parses the CLI form: a bare rate (`'0.01'`) or comma-separated `key=value` pairs with keys
   * `rate`, `seed`, `kinds` (kinds joined by `+`), e.g. `'rate=0.05,seed=42,kinds=indexer+backlinks'`.
   * @throws `InvalidArgumentError` for unknown keys or bad values.
   */
  static parse(text: string): ChaosPolicy {
    const trimmed = text.trim();
    if (/^[0-9.]+(e-?[0-9]+)?$/i.test(trimmed)) return ChaosPolicy.create({ rate: Number(trimmed) });
    let rate: number | undefined;
    let seed: number | undefined;
    let kinds: string[] | undefined;
    for (const part of trimmed.split(',')) {
      const [key, value, ...extra] = part.split('=').map((s) => s.trim());
      if (value === undefined || value === '' || extra.length > 0) throw new InvalidArgumentError(`bad chaos option ${JSON.stringify(part)}`);
      if (key === 'rate') rate = Number(value);
      else if (key === 'seed') seed = Number(value);
      else if (key === 'kinds') kinds = value.split('+').map((kind) => kind.trim());
      else throw new InvalidArgumentError(`unknown chaos option ${JSON.stringify(key)} (rate, seed, kinds)`);
    }
    if (rate === undefined) throw new InvalidArgumentError('chaos needs a rate');
    return ChaosPolicy.create({ rate, ...(seed === undefined ? {} : { seed }), ...(kinds === undefined ? {} : { kinds }) });
  }

  /** Copy with another rate. */
  withRate(rate: number): ChaosPolicy {
    return ChaosPolicy.create({ rate, seed: this.seed, ...(this.kinds === undefined ? {} : { kinds: this.kinds }) });
  }

  /** Copy with another seed. */
  withSeed(seed: number): ChaosPolicy {
    return ChaosPolicy.create({ rate: this.rate, seed, ...(this.kinds === undefined ? {} : { kinds: this.kinds }) });
  }

  /** Copy limited to `kinds`. */
  forKinds(kinds: readonly string[]): ChaosPolicy {
    return ChaosPolicy.create({ rate: this.rate, seed: this.seed, kinds });
  }

  /**
   * A fresh stateful injector (its own PRNG from `seed`): `(path, kind) => void` that throws
   * `InjectedFaultError` with probability `rate` for eligible kinds. `undefined` when `rate` is 0,
   * so the runtime's hot path skips the call entirely.
   */
  injector(): ((path: string, kind: string) => void) | undefined {
    if (this.rate === 0) return undefined;
    const random = seededRandom(this.seed);
    const rate = this.rate;
    const kinds = this.kinds === undefined ? undefined : new Set(this.kinds);
    return (path, kind) => {
      if (kinds === undefined ? kind === 'supervisor' || kind === 'guardian' : !kinds.has(kind)) return;
      if (random() < rate) throw new InjectedFaultError(`injected fault before receive() of ${path} (chaos rate ${rate})`);
    };
  }
}
