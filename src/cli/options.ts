import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InvalidArgumentError } from 'commander';
import { weightFunction } from '../actors/metrics/weights.js';
import { pino, type Logger } from 'pino';
import { freshBrokerIdentity as freshScope, MemoryBroker, PulsarBroker, RedisStreamsBroker, type Broker, type BrokerIdentity } from '../runtime/brokers/index.js';
import { isShardflowError } from '../index.js';

/**
 * Checks a `--weights` value (`uniform`, `reasonable` or a weight table .json) by building
 * its weight function once. @returns the value @throws commander's InvalidArgumentError
 */
export function parseWeights(value: string): string {
  try {
    weightFunction(value);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
  return value;
}

/**
 * An option's decimal digits as a number, NaN for anything else: `Number()` alone also takes
 * `0x10`, `1e2`, `0b1` and an empty string (found by a new user: `--partitions 0x10` ran 16).
 */
function decimal(value: string): number {
  return /^\s*\d+\s*$/.test(value) ? Number(value) : NaN;
}

/**
 * A parser of integer options in [min, max] (decimal digits only).
 * @param what the error's wording of the range, e.g. `an integer >= 1`
 * @returns a commander option parser
 * @throws (the parser) commander's InvalidArgumentError `expected <what>, got <value>`
 */
export function integerIn(min: number, max: number, what: string): (value: string) => number {
  return (value) => {
    const n = decimal(value);
    if (!Number.isSafeInteger(n) || n < min || n > max) throw new InvalidArgumentError(`expected ${what}, got ${value}`);
    return n;
  };
}

/** Parses a positive integer option. @throws commander's InvalidArgumentError */
export const positiveInt = integerIn(1, Number.MAX_SAFE_INTEGER, 'an integer >= 1');

/** Parses an integer option >= 0. @throws commander's InvalidArgumentError */
export const nonNegativeInt = integerIn(0, Number.MAX_SAFE_INTEGER, 'an integer >= 0');

/** Parses a TCP port option: an integer in 0..65535 (0: any free port). @throws commander's InvalidArgumentError */
export const portNumber = integerIn(0, 65535, 'a port in 0..65535');

/** Parses a positive number option. @throws commander's InvalidArgumentError */
export function positiveNumber(value: string): number {
  const n = Number(value);
  if (!(n > 0) || !Number.isFinite(n)) throw new InvalidArgumentError(`expected a number > 0, got ${value}`);
  return n;
}

/** Parses a probability in [0, 1]. @throws commander's InvalidArgumentError */
export function probability(value: string): number {
  const n = Number(value);
  if (!(n >= 0 && n <= 1)) throw new InvalidArgumentError(`expected a probability in [0, 1], got ${value}`);
  return n;
}

/** `--data-dir` or a fresh folder under the OS temp dir. */
export function dataDir(given: string | undefined): string {
  return given ?? mkdtempSync(join(tmpdir(), 'shardflow-'));
}

/**
 * The data folder of a run whose stores are not kept (`demo`, `rank`): `--data-dir` when
 * given (kept), else a fresh temp folder that `remove()` deletes at the end.
 */
export function runDataDir(given: string | undefined): { readonly dir: string; readonly kept: boolean; remove(): void } {
  if (given !== undefined) return { dir: given, kept: true, remove: () => {} };
  const dir = mkdtempSync(join(tmpdir(), 'shardflow-'));
  return { dir, kept: false, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Most partitions a command accepts: each is a RocksDB store with its actors. */
export const MAX_PARTITIONS = 1024;

/** Parses `--partitions`: an integer in 1..MAX_PARTITIONS. @throws commander's InvalidArgumentError */
export const partitionCount = integerIn(1, MAX_PARTITIONS, `an integer from 1 to ${MAX_PARTITIONS}`);

/** The pino logger of the CLI: JSON lines on stderr. */
export function cliLogger(level: string): Logger {
  return pino({ level, base: undefined }, pino.destination(2));
}

/**
 * The broker identity a run on `--broker spec` gets when it does not reuse a recorded one:
 * `memory`; for Redis a fresh key prefix `sf:<run>:`; for Pulsar a fresh tenant
 * `shardflow-<run>` (`<run>`: 8 random hex digits).
 * @throws commander's InvalidArgumentError for an unknown broker
 */
export function freshBrokerIdentity(spec: string): BrokerIdentity {
  try {
    return freshScope(spec);
  } catch (err) {
    if (isShardflowError(err) && err.code === 'SF_ERR_INVALID_ARGUMENT') throw new InvalidArgumentError(err.message);
    throw err;
  }
}

/**
 * The broker named by `--broker`, under `identity` (default: a fresh one, see
 * `freshBrokerIdentity`):
 * - `memory` (default): the embedded in-memory broker;
 * - `redis://host:port[/db]`: Redis Streams, keys under the identity's prefix;
 * - `pulsar://host:port`: Apache Pulsar's WebSocket and admin REST APIs on that HTTP port,
 *   topics under the identity's tenant.
 * A job on a `--data-dir` passes the identity recorded there (DataDir.brokerIdentity), so
 * that the data dir's topics stay under one scope that `shardflow clean` can remove.
 * @throws commander's InvalidArgumentError for an unknown broker; the broker's own
 *   connection errors (BrokerDisconnectedError) when it does not answer
 */
export async function openBroker(spec: string, identity: BrokerIdentity = freshBrokerIdentity(spec)): Promise<Broker> {
  if (identity.kind === 'memory') return new MemoryBroker();
  if (identity.kind === 'redis') return RedisStreamsBroker.connect({ url: spec, prefix: identity.scope! });
  if (identity.kind === 'pulsar') return PulsarBroker.connect({ webUrl: `http://${spec.slice('pulsar://'.length)}`, tenant: identity.scope! });
  throw new InvalidArgumentError(`unsupported broker kind ${JSON.stringify(identity.kind)}`);
}

/** Actor kinds `--chaos` may fail: the web-index actors, never supervisors or partitions. */
export const chaosKinds: readonly string[] = ['crawl-policy', 'indexer', 'backlinks', 'metrics', 'crawler'];
