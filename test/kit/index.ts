/** Test kit for the actor runtime: manual time, a recording probe actor, settling promises. */
export { ManualClock } from './manualClock.js';
export { createProbe } from './probe.js';
export type { Probe } from './probe.js';
export { settle } from './settle.js';
export { recordingBehavior } from './recordingBehavior.js';
export type { Recording } from './recordingBehavior.js';
export { recordingLogger } from './recordingLogger.js';
export type { LogEntry } from './recordingLogger.js';
