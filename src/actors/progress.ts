/**
 * The flow counters moved into the framework (`src/runtime/stream/flowCounters.ts`); this
 * module keeps the web index's imports working.
 */
export { FlowCounters, messageKey } from '../runtime/stream/flowCounters.js';
export type { MessageKey } from '../runtime/stream/flowCounters.js';
