import { open, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { DataDirError, InvalidArgumentError } from '../../errors.js';
import { sequence, type Sequence } from '../ids.js';
import { mkdirs } from '../../storage/mkdirs.js';

/**
 * Producer epochs: a producer that starts again under the same name (a new process on the
 * same data dir) must never have its messages skipped as redeliveries. Each incarnation of an
 * external producer gets an epoch from a durable counter, and its sequences carry it:
 *
 *   sequence = epoch * 2^32 + n      (n = 0, 1, ... per topic within the incarnation)
 *
 * so every sequence of a newer incarnation is above every sequence of an older one, and the
 * consumers' applied marks (one int64 per producer: the highest applied sequence) treat its
 * messages as new. A message whose epoch is below its mark's epoch comes from an older
 * incarnation after a newer one was applied (two live processes under one producer name):
 * consumers dead-letter it with that reason instead of skipping it (`StreamMarks.classify`).
 *
 * Marks written without epochs (the web index's, or a stage's outbox producer, whose
 * sequences are durable in its store) read as epoch 0. Limits: epochs < 2^21, n < 2^32 per
 * topic and incarnation (a producer that sends more to one topic moves into the next epoch's
 * range: still ordered, never skipped).
 */
export const EPOCH_SPAN = 2 ** 32;

/** Highest epoch: sequences stay safe integers (2^21 * 2^32 = 2^53). */
export const MAX_EPOCH = 2 ** 21 - 1;

/** The epoch-packed sequence of message `n` of incarnation `epoch`. @throws RangeError outside the limits above. */
export function epochSequence(epoch: number, n: number): Sequence {
  if (!Number.isInteger(epoch) || epoch < 0 || epoch > MAX_EPOCH) throw new RangeError(`producer epoch ${epoch} outside [0, ${MAX_EPOCH}]`);
  return sequence(epoch * EPOCH_SPAN + n);
}

/** The epoch a sequence carries (0 for sequences written without one). */
export function sequenceEpoch(seq: number): number {
  return Math.floor(seq / EPOCH_SPAN);
}

/** Producer names: 1 to 128 of letters, digits, `.`, `_`, `-` (they name a file and broker fields). */
export const PRODUCER_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** @throws InvalidArgumentError when `name` is not a {@link PRODUCER_NAME}. */
export function checkProducerName(name: string): void {
  if (!PRODUCER_NAME.test(name)) throw new InvalidArgumentError(`producer name ${JSON.stringify(name)} must be 1 to 128 letters, digits, '.', '_' or '-'`);
}

/**
 * Increments and returns the durable epoch of producer `name` under `dataDir`: the file
 * `<dataDir>/producers/<name>.epoch` holds the last epoch given (decimal); the new value is
 * written to a temporary file, fsynced and renamed over it before it is returned, so an
 * epoch is never given twice, even across a crash. The first incarnation gets 1 (0 is the
 * epoch of marks written without epochs).
 * @throws InvalidArgumentError for a bad name; DataDirError when the file is damaged or
 *   the epoch limit is reached; the file system's errors
 */
export async function nextProducerEpoch(dataDir: string, name: string): Promise<number> {
  checkProducerName(name);
  const dir = join(dataDir, 'producers');
  await mkdirs(dir);
  const file = join(dir, `${name}.epoch`);
  let last = 0;
  try {
    const text = (await readFile(file, 'utf8')).trim();
    last = Number(text);
    if (!/^\d+$/.test(text) || !Number.isSafeInteger(last)) throw new DataDirError(`producer epoch file ${file} is damaged (${JSON.stringify(text.slice(0, 40))}): restore it, or remove it only if no consumer has marks of producer ${name}`);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const epoch = last + 1;
  if (epoch > MAX_EPOCH) throw new DataDirError(`producer ${name} has used all ${MAX_EPOCH} epochs (${file})`);
  const tmp = `${file}.tmp`;
  const handle = await open(tmp, 'w');
  try {
    await handle.writeFile(`${epoch}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(tmp, file);
  return epoch;
}
