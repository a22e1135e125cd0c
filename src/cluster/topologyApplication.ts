import { startPartitionHost } from '../runtime/topology/partitionHost.js';
import type { StageTypes, Topology } from '../runtime/topology/topology.js';
import type { ApplicationHost, ClusterApplication } from './application.js';
import { isStageFlowRequest } from './askWire.js';
import { clusterStages } from './units.js';

/**
 * A framework `Topology` as a {@link ClusterApplication}: its stages are the cluster's units
 * (`clusterStages`: a stage's partitions are its input namespace's), its host is
 * `startPartitionHost(topology, options)`, and `ask(stage, p, request)` is the partition
 * host's `ask`: the stage's `query` hook on that partition's store, beside its batches (retried
 * across a restart of the partition; the hook's own error is thrown as it was), but for
 * `STAGE_FLOW_REQUEST`, answered with the partition's flow report. It supports
 * checkpoints (`startWorker({ checkpoints })`: `PartitionHostOptions.checkpoints`).
 *
 * `startWorker({ topology })` is `startWorker({ application: topologyApplication(topology) })`.
 * @throws InvalidArgumentError (from `startHost`) when a namespace is defined twice
 */
export function topologyApplication<S extends Record<string, StageTypes>>(topology: Topology<S>): ClusterApplication {
  return {
    name: topology.name,
    stages: clusterStages(topology as unknown as Topology<Record<string, StageTypes>>),
    supportsCheckpoints: true,
    async startHost(options): Promise<ApplicationHost> {
      const host = await startPartitionHost(topology, options);
      return {
        system: host.system,
        inspection: host.inspection,
        startPartition: (stage, partition, fence) => host.startPartition(stage, partition, fence),
        stopPartition: (stage, partition, options) => host.stopPartition(stage, partition, options),
        partitions: () => host.partitions(),
        ask: (stage, partition, request) => (isStageFlowRequest(request) ? host.flow(stage, partition) : host.ask(stage, partition, request as S[string]['request'])),
        stop: () => host.stop(),
      };
    },
  };
}
