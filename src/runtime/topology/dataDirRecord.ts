import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import writeFileAtomic from 'write-file-atomic';
import { DataDirError } from '../../errors.js';
import type { BrokerIdentity } from '../brokers/identity.js';

/** Name of a topology data dir's record file (JSON), next to `stages/` and `producers/`. */
export const TOPOLOGY_RECORD_FILE = 'topology.json';

/** What one stage's stores were written as: its `StageShape` without the partition. */
export interface RecordedStage {
  readonly stage: string;
  /** Input namespace. */
  readonly namespace: string;
  readonly partitions: number;
  /** `KeyPartitioner.describe()` of the input namespace, e.g. `fnv1a/8`. */
  readonly partitioner: string;
}

/**
 * The record of a topology data dir (`<dataDir>/topology.json`): which topology runs on it,
 * its stages' shapes, the broker its last run used, and how that run ended. `state` is
 * `running` from the start of a run until a stop that found nothing in flight, then
 * `quiet`: a run that is killed, or stopped with messages in flight, leaves `running`, and
 * the next start resumes on the same durable broker scope or refuses with the reason
 * (docs/ARCHITECTURE.md, "Topology data dirs").
 *
 * ```json
 * { "format": 1, "topology": "click-counter",
 *   "stages": [{ "stage": "count", "namespace": "clicks", "partitions": 8, "partitioner": "fnv1a/8" }],
 *   "broker": { "kind": "redis", "url": "redis://127.0.0.1:6379", "scope": "sf:1a2b3c4d:" },
 *   "state": "running", "pid": 4242, "runs": 3, "updatedAt": "2025-01-01T00:00:00.000Z" }
 * ```
 */
export interface TopologyRecord {
  readonly format: 1;
  /** `Topology.name`. */
  readonly topology: string;
  readonly stages: readonly RecordedStage[];
  /** The broker of the last run (`Broker.identity`; `{ kind }` alone for a broker without one). */
  readonly broker: BrokerIdentity;
  readonly state: 'running' | 'quiet';
  /** Process id of the run that wrote the record last. */
  readonly pid: number;
  /** Runs started on this data dir. */
  readonly runs: number;
  /** ISO time of the last change. */
  readonly updatedAt: string;
}

/**
 * Reads the record of the topology data dir `dataDir`, e.g. to connect to the broker scope
 * a killed run left its messages on (`connectBroker(readTopologyRecord(dir)!.broker)`).
 * @returns undefined when the data dir has no record (new, or written before records)
 * @throws DataDirError when the file does not parse or lacks a field (its path and why)
 */
export function readTopologyRecord(dataDir: string): TopologyRecord | undefined {
  const file = join(dataDir, TOPOLOGY_RECORD_FILE);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  try {
    return checkRecord(JSON.parse(text));
  } catch (err) {
    throw new DataDirError(`topology data dir record ${file} is damaged (${(err as Error).message}): restore it, or give a fresh data dir`, { cause: err });
  }
}

/**
 * Writes the record: to a temporary file, fsynced, renamed over `topology.json`
 * (write-file-atomic), so that a kill leaves the old record or the new one.
 * @throws the file system's errors
 */
export async function writeTopologyRecord(dataDir: string, record: TopologyRecord): Promise<void> {
  await writeFileAtomic(join(dataDir, TOPOLOGY_RECORD_FILE), `${JSON.stringify(record, null, 2)}\n`, { fsync: true });
}

/** `record` when it has every field of a TopologyRecord. @throws Error naming the first bad field */
function checkRecord(record: unknown): TopologyRecord {
  const r = record as Partial<TopologyRecord> | null;
  const bad = (field: string) => new Error(`bad or missing field ${field}`);
  if (typeof r !== 'object' || r === null || r.format !== 1) throw bad('format');
  if (typeof r.topology !== 'string') throw bad('topology');
  if (!Array.isArray(r.stages)) throw bad('stages');
  for (const s of r.stages) {
    const stage = s as Partial<RecordedStage>;
    if (typeof stage.stage !== 'string' || typeof stage.namespace !== 'string' || !Number.isInteger(stage.partitions) || typeof stage.partitioner !== 'string') throw bad('stages[]');
  }
  if (typeof r.broker !== 'object' || r.broker === null || typeof r.broker.kind !== 'string') throw bad('broker');
  if (r.state !== 'running' && r.state !== 'quiet') throw bad('state');
  if (!Number.isInteger(r.pid) || !Number.isInteger(r.runs)) throw bad(Number.isInteger(r.pid) ? 'runs' : 'pid');
  return r as TopologyRecord;
}
