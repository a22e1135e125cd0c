import type { Broker } from '../brokers/broker.js';
import { partitionId } from '../ids.js';
import { topic, topicName } from '../topics.js';
import type { StageEntry } from './topology.js';

/** What a durable broker holds, not acked, for one stage partition's subscription. */
export interface StageBacklog {
  /** Topic name, e.g. `clicks/3`. */
  readonly topic: string;
  /** The stage's subscription (its name), e.g. `count`. */
  readonly subscription: string;
  /** Messages not acked yet (delivered and pending, or not delivered); undefined when the broker has no such subscription. */
  readonly messages: number | undefined;
}

/**
 * The backlog of every stage partition's subscription (`<stage>` on `<input>/<p>`), as the
 * broker counts it (`Broker.subscriptionBacklog`: Redis XINFO GROUPS pending + lag, Pulsar's
 * `msgBacklog`).
 * @throws Error for a broker without `subscriptionBacklog` (not durable: nothing to count);
 *   BrokerDisconnectedError when the broker does not answer
 */
export async function stageBacklogs(broker: Broker, stages: readonly StageEntry[]): Promise<StageBacklog[]> {
  const backlog = broker.subscriptionBacklog?.bind(broker);
  if (!backlog) throw new Error(`a ${broker.kind} broker keeps no messages across processes: it has no backlog`);
  const out: StageBacklog[] = [];
  for (const s of stages) {
    for (let p = 0; p < s.def.input.partitioner.partitions; p++) {
      const t = topic(s.def.input.name, partitionId(p));
      out.push({ topic: topicName(t), subscription: s.name, messages: await backlog(t, s.name) });
    }
  }
  return out;
}
