/**
 * The actor runtime: behaviours as values, refs, the system. Supervision strategies live in
 * `../supervision/`, lifecycle events and tree snapshots in `../inspection.ts`.
 */

// Defining actors
export type { Behavior } from './behavior.js';
export type { ActorContext } from './context.js';
export { DetachedReply, detachReply } from './detachedReply.js';
export type { SpawnOptions, MailboxOptions, OverflowPolicy } from './spawnOptions.js';

// Talking to actors
export type { ActorRef, AskOptions } from './ref.js';

// Death watch
export type { Terminated } from './terminated.js';

// Running actors
export { ActorSystem } from './system.js';
export type { ActorSystemOptions, Termination } from './system.js';
export { consoleLogger } from './logger.js';
export type { Logger } from './logger.js';

// Fault injection (--chaos)
export { ChaosPolicy } from './chaosPolicy.js';
export type { ChaosPolicyOptions } from './chaosPolicy.js';
