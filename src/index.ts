/**
 * `shardflow`: the public entry of the package (after RxJS's `src/index.ts`: named exports
 * grouped by section, nothing re-exported wholesale). What is not exported here or from a
 * subpath (`shardflow/storage`, `shardflow/brokers`, `shardflow/testing`) is internal and may
 * change without notice. docs/ARCHITECTURE.md describes the layers.
 *
 * @module shardflow
 */

/* Topologies: namespaces, stages, starting them */
export { Topology } from './runtime/topology/topology.js';
export type { StageTypes, StagesOf, ColumnFamiliesOf } from './runtime/topology/topology.js';
export { DEFAULT_STAGE_SUPERVISION, DEFAULT_QUIESCENCE_TIMEOUT_MS, DEFAULT_STOP_TIMEOUT_MS } from './runtime/topology/running.js';
export type { RunningTopology, TopologyStartOptions } from './runtime/topology/running.js';
export { defineNamespace } from './runtime/stream/namespace.js';
export type { NamespaceDef, NamespaceOptions } from './runtime/stream/namespace.js';
export type { StageDef, StageContext, StageWrites, StageReads, StageOutputs, MessageOf } from './runtime/stream/stage.js';
export { defaultMessageErrorDecision } from './runtime/stream/messageErrors.js';
export { DEFAULT_MAX_ATTEMPTS } from './runtime/stream/poisonMessages.js';
export type { MessageErrorDecision } from './runtime/stream/messageErrors.js';
export type { StageBatchReport } from './runtime/stream/applyBatch.js';
export type { StageCompactionReport } from './runtime/stream/stageCompaction.js';
export { askWithRetry } from './runtime/topology/askWithRetry.js';
export type { AskRetryOptions } from './runtime/topology/askWithRetry.js';

/* Data dirs: the record of a topology's runs (resume, or refuse with the reason), one run at a time (a lock file with the pid) */
export { readTopologyRecord, TOPOLOGY_RECORD_FILE } from './runtime/topology/dataDirRecord.js';
export { brokerIdentityFor } from './runtime/topology/brokerIdentityFor.js';
export type { TopologyRecord, RecordedStage } from './runtime/topology/dataDirRecord.js';
export { TOPOLOGY_LOCK_FILE } from './runtime/topology/topologyDataDir.js';
export type { TopologyRecovery, UncleanPolicy } from './runtime/topology/topologyDataDir.js';
export { acquireDataDirLock, lockFileHolder } from './runtime/topology/dataDirLock.js';
export type { DataDirLock, DataDirLockOptions } from './runtime/topology/dataDirLock.js';

/* Producers from outside a topology (epochs: a restarted producer is never skipped) */
export { openExternalProducer } from './runtime/topology/externalProducer.js';
export type { TopologyProducer, ExternalProducerOptions } from './runtime/topology/externalProducer.js';
export { epochSequence, sequenceEpoch, MAX_EPOCH } from './runtime/stream/producerEpoch.js';

/* Cluster: workers that share a topology's (or any ClusterApplication's) partitions, coordinated through Redis (docs/cluster.md) */
export { startWorker, DEFAULT_LEASE_MS, MIN_WORKER_LEASE_MS } from './cluster/worker.js';
export type { Worker, WorkerOptions, WorkerCommonOptions } from './cluster/worker.js';
export type { ClusterApplication, ApplicationHost, ApplicationHostOptions } from './cluster/application.js';
export { topologyApplication } from './cluster/topologyApplication.js';
export { connectClusterClient, DEFAULT_REMOTE_ASK_TIMEOUT_MS } from './cluster/clusterClient.js';
export type { ClusterClient, ClusterClientOptions, ClusterQuiescenceOptions, RemoteAskKeyOptions, RemoteAskOptions } from './cluster/clusterClient.js';
export { STAGE_FLOW_REQUEST } from './cluster/askWire.js';
export type { WorkerEvent } from './cluster/events.js';
export { clusterStatus, listClusters } from './cluster/status.js';
export { clusterBrokerIdentity } from './cluster/brokerScope.js';
export { retireCluster } from './cluster/retire.js';
export type { RetireClusterOptions, RetireClusterReport } from './cluster/retire.js';
export { loadTopology, loadClusterApplication } from './cluster/topologyModule.js';
export { CLUSTER_NAME, DEFAULT_CLUSTER_PREFIX } from './cluster/keys.js';
export type { ClusterStatus, ClusterStatusOptions, PartitionStatus } from './cluster/status.js';
export type { MemberReport } from './cluster/membership.js';
export { assignPartitions } from './cluster/assignment.js';
export type { AssignmentInput, AssignmentResult, AssignableWorker, Move } from './cluster/assignment.js';
export type { PartitionUnit, ClusterStage } from './cluster/units.js';
export { startPartitionHost } from './runtime/topology/partitionHost.js';
export type { PartitionHost, PartitionHostOptions, PartitionStopOptions, HostedPartition } from './runtime/topology/partitionHost.js';
export { DEFAULT_CHECKPOINT_INTERVAL_MS, CHECKPOINTS_KEPT, CHECKPOINT_SEQUENCE_KEY, stageCheckpointKey, restoreStageStoreIfBehind, PartitionCheckpointPuts } from './runtime/stream/stageCheckpoints.js';
export { PartitionCheckpointer, type PartitionCheckpointerOptions } from './runtime/stream/partitionCheckpointer.js';
export type { CheckpointRegistry, StageCheckpointing, StageRestore, StagePut, StagePutFailure, StageCheckpointMetadata } from './runtime/stream/stageCheckpoints.js';
export type { PartitionFence } from './runtime/stream/ownerEpoch.js';
export { recordOwnerEpoch, readOwnerEpoch, ownerPriority, OWNER_EPOCH_KEY } from './runtime/stream/ownerEpoch.js';
export { stopWhenFenced, onFenced } from './runtime/topology/fencedSupervision.js';
export { spawningSupervisor } from './runtime/topology/spawningSupervisor.js';
export type { SpawningSupervisorMessage } from './runtime/topology/spawningSupervisor.js';
/* Quiet detection across processes, from the stores' stream bookkeeping (Mattern's four counters) */
export { readStreamFlow, unappliedStreams, sameStreamFlow, waitStreamsQuiet } from './runtime/stream/flowReport.js';
export type { StreamFlowReport, FlowCollection, OutboxFlow, ConsumerFlow, SentStream, StreamReceiver, UnappliedOptions, UnappliedStream, WaitQuietOptions, QuietReport } from './runtime/stream/flowReport.js';

/* Codecs and partitioning */
export { msgpackCodec, type MsgpackCodecOptions } from './runtime/codec.js';
export type { Codec } from './runtime/codec.js';
export { keyPartitioner, hostOf, fnv1a32 } from './runtime/partitioner.js';
export type { KeyPartitioner } from './runtime/partitioner.js';
export { partitionId, producerId, sequence } from './runtime/ids.js';
export type { PartitionId, ProducerId, Sequence, Branded } from './runtime/ids.js';

/* Column families: merge operators and compaction filters (native, declared by name) */
export {
  int64Add,
  float64Add,
  max,
  min,
  lastWriteWins,
  set,
  record,
  encodeInt64,
  decodeInt64,
  encodeFloat64s,
  decodeFloat64s,
  encodeLww,
  decodeLww,
  lwwTombstone,
  encodeSetOps,
  decodeSet,
  encodeRecord,
  decodeRecord,
  recordSetOps,
} from './operators/mergeOperators.js';
export type { MergeOperatorSpec, FieldRule } from './operators/mergeOperators.js';
export { ttl, tombstones, dropPrefixes } from './operators/compactionFilters.js';
export type { CompactionFilterSpec } from './operators/compactionFilters.js';
export type { ColumnFamilyOptions, Key } from './storage/index.js';

/* Brokers (the full broker surface is `shardflow/brokers`) */
export { MemoryBroker } from './runtime/brokers/memory.js';
export { RedisStreamsBroker } from './runtime/brokers/redis-streams.js';
export { PulsarBroker } from './runtime/brokers/pulsar/broker.js';
export { connectBroker, freshBrokerIdentity } from './runtime/brokers/connect.js';
export { deleteBrokerScope } from './runtime/brokers/scope.js';
export type { Broker, BrokerMessage, Consumer, DeadLetter } from './runtime/brokers/broker.js';
export type { BrokerIdentity } from './runtime/brokers/identity.js';

/* Actors and supervision */
export { ActorSystem, ChaosPolicy, consoleLogger, DetachedReply, detachReply } from './runtime/actor/index.js';
export type { Behavior, ActorContext, ActorRef, AskOptions, SpawnOptions, Logger, ActorSystemOptions, ChaosPolicyOptions, Termination } from './runtime/actor/index.js';
export { SupervisorStrategy, seededRandom } from './runtime/supervision/index.js';
export type { BackoffInput, Directive, SupervisionScope, ChildSpec } from './runtime/supervision/index.js';
export { systemClock } from './runtime/clock.js';
export type { Clock, Cancel } from './runtime/clock.js';

/* Flow, quiescence and the console */
export { FlowCounters } from './runtime/stream/flowCounters.js';
export { startInspectionServer } from './runtime/inspection/server.js';
export type { InspectionServer, InspectionServerOptions } from './runtime/inspection/server.js';
export { batchMessages } from './operators/batchMessages.js';
export type { BatchMessagesConfig } from './operators/batchMessages.js';

/* Errors (match on `code`) */
export {
  ShardflowError,
  isShardflowError,
  isTerminalError,
  terminalError,
  InvalidArgumentError,
  UndecodableMessageError,
  DataDirError,
  JobStalledError,
  AskTimeoutError,
  ActorStoppedError,
  InjectedFaultError,
  BrokerDisconnectedError,
  BrokerDataLostError,
  BrokerClosedError,
  StoreClosedError,
  StoreCorruptionError,
  StoreIOError,
  StoreBusyError,
  UnknownMergeOperatorError,
  MergeOperatorMismatchError,
  FencedError,
  RemoteAskError,
  CheckpointDamagedError,
  CheckpointNotFoundError,
  S3RequestError,
} from './errors.js';

/* More errors the framework throws (brokers, partitioner, mailboxes, supervision, jobs; docs/errors.md) */
export { PayloadTooLargeError, InvalidUrlError, JobInterruptedError, MailboxFullError, RestartIntensityExceededError, ProducerFailedError } from './errors.js';

/*
 * Actors written by hand (an application beyond stages, as the web index is): exactly-once
 * effects in the store such an actor owns (applied marks, the transactional outbox, in column
 * families it names), fed in batches from a broker consumer, counted in the flow counters.
 */
export { PREVIOUS_EPOCHS_KEPT, StreamMarks } from './runtime/stream/appliedMarks.js';
export type { MarkVerdict } from './runtime/stream/appliedMarks.js';
export { StreamOutbox, outboxProducerKey } from './runtime/stream/outbox.js';
export type { StreamOutboxOptions } from './runtime/stream/outbox.js';
export { StreamColumnFamilies } from './runtime/stream/reserved.js';
export type { StreamColumnFamilyNames } from './runtime/stream/reserved.js';
export { feedDeliveries } from './runtime/stream/deliveries.js';
export type { Deliveries } from './runtime/stream/deliveries.js';
export { applyExactlyOnce } from './runtime/stream/exactlyOnce.js';
export type { ExactlyOnceContext } from './runtime/stream/exactlyOnce.js';
export { messageKey } from './runtime/stream/flowCounters.js';
export type { MessageKey, SettledMessage } from './runtime/stream/flowCounters.js';
export { TopicFlowCounters } from './runtime/inspection/topicFlow.js';

/* The console from outside: an endpoint bound before its actor system exists; the tree and events it serves */
export { listenInspection } from './runtime/inspection/server.js';
export type { InspectionEndpoint, InspectionListenOptions, InspectionSources } from './runtime/inspection/server.js';
export { readEventStream } from './runtime/inspection/eventStream.js';
export type { ServerSentEvent } from './runtime/inspection/eventStream.js';
export type { TreeNode, ActorStatus, LifecycleEvent, ErrorSummary } from './runtime/inspection.js';

/* An application's own HTTP endpoints: the Host header check against DNS rebinding */
export { hostHeaderCheck, isLoopbackName } from './runtime/http/hostCheck.js';
export type { HostCheckOptions } from './runtime/http/hostCheck.js';

/* Types that the signatures above name (exported so consumers and the API reference can name them) */
export type { StageEntry } from './runtime/topology/topology.js';
export type { BackoffOptions, RestartLimit, DeciderRule, Decision, ErrorMatcher, ActorSpec, SupervisorSpec } from './runtime/supervision/index.js';
export type { MailboxOptions, OverflowPolicy, Terminated } from './runtime/actor/index.js';
export type { ActorInspectionEvent } from './runtime/actor/system.js';
export type { StartedEvent, StoppedEvent, FailedEvent, RestartedEvent, EscalatedEvent } from './runtime/inspection.js';
export type { NamespaceFlowSource, TopicFlowSource, TopicFlow } from './runtime/inspection/flowSource.js';
export type { StoreErrorOptions } from './errors.js';
