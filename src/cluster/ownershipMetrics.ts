import { Gauge, type Registry } from 'prom-client';
import type { Ownership } from './ownership.js';

/** The states `shardflow_cluster_partitions` counts: a worker's owned units, and the ones it refused. */
const STATES = ['opening', 'running', 'stopping', 'failed'] as const;

/**
 * Adds a cluster worker's ownership to its inspection endpoint's `/metrics` (found by a new
 * user: a worker's metrics held no cluster state, so Prometheus could not alert on a partition
 * that stopped running or a lease about to run out):
 *
 * | metric | type | labels | meaning |
 * |---|---|---|---|
 * | `shardflow_cluster_partitions` | gauge | `state` | units this worker holds the lease of, by state (`opening`, `running`, `stopping`), and `failed`: units it refused (every state, 0 included) |
 * | `shardflow_cluster_lease_remaining_seconds` | gauge | `unit` | seconds left on the lease of each owned unit, on this process's clock less the safety margin (0 once run out) |
 * | `shardflow_cluster_lease_epoch` | gauge | `unit` | the lease epoch (fencing token) of each owned unit |
 *
 * @param owned the worker's owned units, read at each scrape
 * @param failed how many units the worker refused, read at each scrape
 */
export function registerOwnershipMetrics(registry: Registry, owned: () => Iterable<Ownership>, failed: () => number): void {
  new Gauge({
    name: 'shardflow_cluster_partitions',
    help: 'Units this worker holds the lease of, by state; failed: units it refused.',
    labelNames: ['state'] as const,
    registers: [registry],
    collect() {
      const counts = new Map<string, number>(STATES.map((s) => [s, 0]));
      for (const o of owned()) counts.set(o.state, (counts.get(o.state) ?? 0) + 1);
      counts.set('failed', failed());
      for (const [state, n] of counts) this.set({ state }, n);
    },
  });
  new Gauge({
    name: 'shardflow_cluster_lease_remaining_seconds',
    help: 'Seconds left on the lease of each owned unit (local clock, less the safety margin).',
    labelNames: ['unit'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const o of owned()) this.set({ unit: o.unit }, Math.max(0, o.lease.remainingMs()) / 1000);
    },
  });
  new Gauge({
    name: 'shardflow_cluster_lease_epoch',
    help: 'Lease epoch (fencing token) of each owned unit.',
    labelNames: ['unit'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const o of owned()) this.set({ unit: o.unit }, o.lease.epoch);
    },
  });
}
