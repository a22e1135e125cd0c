/** Moved to `shardflow/testing` (src/testing/manualClock.ts). */
export { ManualClock } from '../../src/testing/manualClock.js';
