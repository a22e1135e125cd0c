import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { INSPECT_HOST_HELP, INSPECT_PORT_HELP, inspectPort } from './inspect.js';
import { MAX_PARTITIONS, parseWeights, partitionCount, positiveNumber, probability } from './options.js';

/**
 * The options every job command shares (`demo`, `rank`): partitions, data folder, link
 * weights, tolerance, broker, chaos, log level and the inspection endpoint.
 * @param weights the default of `--weights` and its help text
 */
export function withJobOptions(command: Command, weights: { readonly default: string; readonly help: string }): Command {
  return command
    .option('--partitions <n>', `number of partitions (1..${MAX_PARTITIONS})`, partitionCount, 16)
    .option('--data-dir <dir>', "folder for the partitions' RocksDB stores, kept (default: a temp folder, removed at the end)")
    .option('--weights <name>', weights.help, parseWeights, weights.default)
    .option('--tolerance <t>', 'L1 tolerance of the normalised scores', positiveNumber, 1e-9)
    .option('--broker <spec>', 'broker: memory, redis://HOST:PORT or pulsar://HOST:PORT', 'memory')
    .option('--chaos <rate>', 'fail a random actor with this probability per processed message', probability, 0)
    .option('--log-level <level>', 'pino log level on stderr', 'warn')
    .option('--inspect-port <port>', INSPECT_PORT_HELP, inspectPort)
    .option('--inspect-host <host>', INSPECT_HOST_HELP, '127.0.0.1');
}

/**
 * What a `--weights` value ranks with, for records that must tell one weighting from another:
 * `uniform`, `reasonable`, or `table:<16 hex digits of the table file's SHA-256>` (the same
 * table under any path is the same weighting; an edited table is another).
 * @throws the table file's read errors (ENOENT, ...)
 */
export function weightsLabel(name: string): string {
  return name.endsWith('.json') ? `table:${createHash('sha256').update(readFileSync(name)).digest('hex').slice(0, 16)}` : name;
}
