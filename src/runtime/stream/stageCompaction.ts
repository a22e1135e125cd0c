import { InvalidArgumentError } from '../../errors.js';
import type { Store } from '../../storage/index.js';
import type { PartitionId } from '../ids.js';
import type { StageDef, StageOutputs } from './stage.js';

/** Asks a stage partition to compact one of its column families (between batches). */
export interface StageCompaction {
  readonly type: 'compact';
  readonly columnFamily: string;
}

/** What compacting one column family of one stage partition did. */
export interface StageCompactionReport {
  readonly partition: PartitionId;
  readonly columnFamily: string;
  /**
   * Values the family's compaction filter examined and dropped while the compaction ran
   * (RocksDB's background compactions of that family in the same interval included); 0 for a
   * family without a filter.
   */
  readonly examined: number;
  readonly dropped: number;
  /** RocksDB's estimate of the family's keys after the compaction. */
  readonly estimatedKeys: number;
}

/**
 * Checks that `columnFamily` is one of the stage's own column families.
 * @throws InvalidArgumentError when it is not (the framework's `sf.*` families included)
 */
export function checkStageFamily(stage: string, def: StageDef<any, StageOutputs, string, any, any>, columnFamily: string): void {
  const declared = Object.keys(def.columnFamilies ?? {});
  if (!declared.includes(columnFamily)) {
    throw new InvalidArgumentError(`stage ${stage}: ${JSON.stringify(columnFamily)} is not one of its column families (declared: ${declared.join(', ') || 'none'})`);
  }
}

/**
 * Compacts the whole key space of `columnFamily` of a stage partition's store (RocksDB
 * `CompactRange`: memtables flushed first, the bottommost level rewritten too), so that its
 * compaction filter (`ttl`, `tombstones`, `dropPrefixes`) has run over every value when the
 * promise resolves, instead of whenever RocksDB next compacts those files.
 * @throws InvalidArgumentError for a family the stage does not declare (see `checkStageFamily`);
 *   the store's errors
 */
export async function compactStageFamily(
  store: Store,
  stage: string,
  def: StageDef<any, StageOutputs, string, any, any>,
  partition: PartitionId,
  columnFamily: string,
): Promise<StageCompactionReport> {
  checkStageFamily(stage, def, columnFamily);
  const before = store.stats().columnFamilies[columnFamily];
  await store.compactRange(columnFamily);
  const after = store.stats().columnFamilies[columnFamily];
  return {
    partition,
    columnFamily,
    examined: (after?.filterExamined ?? 0) - (before?.filterExamined ?? 0),
    dropped: (after?.filterDropped ?? 0) - (before?.filterDropped ?? 0),
    estimatedKeys: after?.estimateNumKeys ?? 0,
  };
}
