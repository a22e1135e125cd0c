import { InvalidArgumentError } from '../errors.js';
import { columnFamilyExtras, type StageTypes, type Topology } from '../runtime/topology/topology.js';

/** One unit of ownership in a cluster: partition `partition` of stage `stage`. */
export interface PartitionUnit {
  readonly stage: string;
  readonly partition: number;
}

/** A stage as a cluster records it: its name, input namespace and partition count. */
export interface ClusterStage {
  readonly name: string;
  readonly namespace: string;
  readonly partitions: number;
  /** The subscription on the input namespace whose backlog is the partition's lag (default: the stage's name, as stages subscribe). */
  readonly subscription?: string;
  /**
   * What else every worker must run alike, as text (e.g. the web index's link weights and
   * damping factor): recorded with the stages by the first worker, so a worker configured
   * otherwise is refused at start instead of computing something else. Absent: nothing.
   */
  readonly config?: string;
  /**
   * How keys map to the stage's partitions (`KeyPartitioner.describe()`, `fnv1a/N` for a
   * topology's namespaces): what `ClusterClient.askKey` routes by. Absent for an application
   * that does not say (the client then needs the partitioner given).
   */
  readonly partitioner?: string;
}

/** The name of a unit in Redis keys and reports: `<stage>/<partition>` (stage names have no `/`). */
export function unitKey(unit: PartitionUnit): string {
  return `${unit.stage}/${unit.partition}`;
}

/** Inverse of `unitKey`. @throws InvalidArgumentError for a name without `/<partition>` */
export function parseUnitKey(key: string): PartitionUnit {
  const slash = key.lastIndexOf('/');
  const partition = Number(key.slice(slash + 1));
  if (slash <= 0 || !Number.isInteger(partition) || partition < 0) throw new InvalidArgumentError(`not a partition unit: ${JSON.stringify(key)}`);
  return { stage: key.slice(0, slash), partition };
}

/** The stages of `topology` as a cluster records them (the input namespace gives each stage's partitions). */
export function clusterStages(topology: Topology<Record<string, StageTypes>>): ClusterStage[] {
  return topology.stages.map((s) => ({ name: s.name, namespace: s.def.input.name, partitions: s.def.input.partitioner.partitions, partitioner: s.def.input.partitioner.describe(), config: stageConfig(s.def) }));
}

/**
 * What of a stage every worker must run alike beyond its input: its column families with
 * their merge operators and compaction filters (a store written with one merge operator is
 * refused by another), and its outputs with their partitioners:
 * `store hosts(shardflow.int64_add.v1), seen(filter ttl); outputs deltas=host-deltas(fnv1a/2)`.
 * Found by a new user: a worker whose stage merged with another operator joined and took
 * partitions that it then refused one by one.
 */
function stageConfig(def: Topology<Record<string, StageTypes>>['stages'][number]['def']): string {
  const cfs = Object.entries(def.columnFamilies ?? {}).map(([cf, o]) => {
    const extras = columnFamilyExtras(o);
    return extras.length ? `${cf}(${extras.join(', ')})` : cf;
  });
  const outputs = Object.entries(def.outputs ?? {}).map(([k, ns]) => `${k}=${ns.name}(${ns.partitioner.describe()})`);
  return `store ${cfs.join(', ') || '-'}; outputs ${outputs.join(', ') || '-'}`;
}

/** Every unit of `stages`, stage by stage, partitions in order: the order assignment walks them in. */
export function allUnits(stages: readonly ClusterStage[]): PartitionUnit[] {
  return stages.flatMap((s) => Array.from({ length: s.partitions }, (_, partition) => ({ stage: s.name, partition })));
}
