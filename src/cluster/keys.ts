import { InvalidArgumentError } from '../errors.js';

/** Cluster names: 1 to 64 letters, digits, `.`, `_`, `-` (they name Redis keys). */
export const CLUSTER_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Default prefix of a cluster's Redis keys. */
export const DEFAULT_CLUSTER_PREFIX = 'sfc:';

/**
 * The Redis keys of one cluster: the one place that names them (`<p>` = prefix + cluster name + `:`).
 *
 * ```
 * <p>topology          JSON [{name, namespace, partitions}]: the stages every worker must run (SET NX by the first)
 * <p>members           set of member ids (joined workers; dead ones are removed by readers)
 * <p>member:<id>       JSON MemberReport of a live worker, PX lease time (its heartbeat)
 * <p>leader            `<member id> <epoch>` of the leader, PX lease time
 * <p>leader:epoch      counter: the leader lease's epoch (INCR at every acquisition)
 * <p>assignment        hash `<stage>/<partition>` -> member id (written by the leader only)
 * <p>assignment:round  counter: assignment writes so far
 * <p>lease:<unit>      `<member id> <epoch>` of the unit's owner, PX lease time
 * <p>epoch:<unit>      counter: the unit's owner epoch (INCR at every acquisition)
 * <p>started           hash `<stage>/<partition>` -> epoch of the first owner whose partition started
 * <p>standbys          hash `<stage>/<partition>` -> comma-separated member ids keeping it warm (written by the leader)
 * <p>retiring          set by `retireCluster` while it runs (PX 60 s): a worker's join is refused meanwhile
 * <p>claim:<name>      a value an application's clients agreed on (`ClusterClient.claim`: SET NX)
 * <p>checkpointed      hash checkpoint key `<cluster>/<stage>/p<i>` -> sequence of its latest durable checkpoint (`RedisCheckpointRegistry`)
 * ```
 */
export class ClusterKeys {
  readonly base: string;
  constructor(readonly clusterName: string, prefix = DEFAULT_CLUSTER_PREFIX) {
    if (!CLUSTER_NAME.test(clusterName)) throw new InvalidArgumentError(`cluster name ${JSON.stringify(clusterName)} must be 1 to 64 letters, digits, '.', '_' or '-'`);
    this.base = `${prefix}${clusterName}:`;
  }
  get topology(): string { return `${this.base}topology`; }
  get members(): string { return `${this.base}members`; }
  member(id: string): string { return `${this.base}member:${id}`; }
  get leader(): string { return `${this.base}leader`; }
  get leaderEpoch(): string { return `${this.base}leader:epoch`; }
  get assignment(): string { return `${this.base}assignment`; }
  get assignmentRound(): string { return `${this.base}assignment:round`; }
  lease(unit: string): string { return `${this.base}lease:${unit}`; }
  epoch(unit: string): string { return `${this.base}epoch:${unit}`; }
  get started(): string { return `${this.base}started`; }
  /** The checkpoint store the cluster's partitions were first run with (`CheckpointStore.location`): `checkClusterCheckpoints`. */
  get checkpoints(): string { return `${this.base}checkpoints`; }
  get standbys(): string { return `${this.base}standbys`; }
  get checkpointed(): string { return `${this.base}checkpointed`; }
  claim(name: string): string { return `${this.base}claim:${name}`; }
  get retiring(): string { return `${this.base}retiring`; }
}
