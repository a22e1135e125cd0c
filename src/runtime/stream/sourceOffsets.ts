import { producerId, type ProducerId } from '../ids.js';

/**
 * Producers whose sequences are the caller's source offsets (positions in a replayable input:
 * a file's lines, a source partition's offsets), as `openExternalProducer({ offsets: true })`
 * opens them. Their id is the name with this suffix, which no producer name can hold (names
 * are letters, digits, `.`, `_`, `-`), so their marks never mix with an epoch producer's of the
 * same name. A consumer takes any of their messages at or below its mark as applied: the input
 * sent again after a crash is skipped up to where each partition got (`StreamMarks.classify`).
 */
export const OFFSETS_PRODUCER_SUFFIX = '#offsets';

/** The producer id of the offsets producer `name` (a valid producer name). */
export function offsetsProducerId(name: string): ProducerId {
  return producerId(`${name}${OFFSETS_PRODUCER_SUFFIX}`);
}

/** Whether `producer` numbers its messages by source offsets (see {@link OFFSETS_PRODUCER_SUFFIX}). */
export function numbersByOffsets(producer: string): boolean {
  return producer.endsWith(OFFSETS_PRODUCER_SUFFIX);
}
