/** Moved to `shardflow/testing` (src/testing/probe.ts). */
export { createProbe } from '../../src/testing/probe.js';
export type { Probe } from '../../src/testing/probe.js';
