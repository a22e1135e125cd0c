/**
 * What a worker reports as it goes (`WorkerOptions.onEvent`): one event per change of its
 * membership, leadership or partition ownership. `unit` is `<stage>/<partition>`, `epoch`
 * the unit's owner epoch.
 */
export type WorkerEvent =
  | { readonly type: 'joined'; readonly worker: string }
  /** This worker took the leader lease. */
  | { readonly type: 'leader'; readonly worker: string; readonly epoch: number }
  /** The leader wrote an assignment round. */
  | { readonly type: 'assigned'; readonly round: number; readonly placed: readonly string[]; readonly moves: ReadonlyArray<{ readonly unit: string; readonly from: string; readonly to: string }>; readonly unplaced: readonly string[] }
  /** The unit's lease was taken; the store opens next. */
  | { readonly type: 'acquired'; readonly unit: string; readonly epoch: number }
  /** The store is still held by the unit's previous owner (a process that has not closed it yet); retried every heartbeat. */
  | { readonly type: 'waiting'; readonly unit: string; readonly epoch: number; readonly reason: string }
  /**
   * With checkpoints: the unit's latest checkpoint (`sequence`, `bytes`) was restored into this
   * worker's data dir before its store opened, in `seconds`; `reason`: why the local store was
   * not used (missing, or older); `cachedBytes` of `bytes` came from this worker's warm
   * standby cache instead of the checkpoint store.
   */
  | { readonly type: 'restored'; readonly unit: string; readonly epoch: number; readonly sequence: number; readonly bytes: number; readonly seconds: number; readonly reason: string; readonly walChunks: number; readonly cachedBytes: number }
  /**
   * With `standbyReplicas`: a warm pass fetched into this worker's cache what the unit's newest
   * checkpoint (`sequence`) added (`fetchedFiles`, `fetchedBytes`); `files`, `bytes`: what of
   * it the cache now holds (docs/cluster.md, "Warm standbys").
   */
  | { readonly type: 'warmed'; readonly unit: string; readonly sequence: number; readonly files: number; readonly bytes: number; readonly fetchedFiles: number; readonly fetchedBytes: number; readonly seconds: number }
  /**
   * With checkpoints: a checkpoint of the unit is durable (`sequence`; `files`, `bytes` of the
   * whole store; `uploadedFiles`, `uploadedBytes` stored by this put, the rest shared with
   * earlier ones; `checkpointSeconds` for the local RocksDB checkpoint, `uploadSeconds` for
   * hashing and storing). One per put: periodic, asked for by a reply or a full unacked
   * window, and the hand-back's last one before `released`.
   */
  | {
    readonly type: 'checkpointed'; readonly unit: string; readonly epoch: number; readonly sequence: number; readonly files: number; readonly bytes: number;
    readonly uploadedFiles: number; readonly uploadedBytes: number; readonly checkpointSeconds: number; readonly uploadSeconds: number;
    /** The put stored only the WAL's new bytes (a WAL tail put, docs/checkpoints.md). */
    readonly walTail: boolean;
    /** Manifests in the object that holds this put's: 1 alone, more in a group object (group commits, docs/checkpoints.md). */
    readonly groupedManifests: number;
  }
  | { readonly type: 'started'; readonly unit: string; readonly epoch: number }
  /** A planned hand-back: the partition stopped (store flushed and closed), then the lease was released. */
  | { readonly type: 'released'; readonly unit: string; readonly epoch: number }
  /** The lease was lost or ran out: the partition stopped without committing anything more. */
  | { readonly type: 'fenced'; readonly unit: string; readonly epoch: number; readonly reason: string }
  /** The worker refuses to run the unit (its reason: a store of another shape, a corrupt store); it stays in the member report. */
  | { readonly type: 'failed'; readonly unit: string; readonly epoch: number; readonly reason: string }
  | { readonly type: 'left'; readonly worker: string };
