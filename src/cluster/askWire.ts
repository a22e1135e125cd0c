import { msgpackCodec, type Codec } from '../runtime/codec.js';
import { partitionId } from '../runtime/ids.js';
import { fnv1a32 } from '../runtime/partitioner.js';
import { RESERVED_NAMESPACE_PREFIX, topic, type Topic } from '../runtime/topics.js';
import type { ClusterStage } from './units.js';

/**
 * The wire of a cluster's remote asks (docs/cluster.md, "Asking partitions across the
 * cluster"): the one module that names their topics and shapes their messages.
 *
 * ```
 * sf-ask-<stage>/<p>     requests for partition p of stage (failover subscription `sf-ask`,
 *                        consumed by the unit's owner only); a stage name that is not a
 *                        namespace name (upper case, `_`, `.`, too long) gives
 *                        sf-askx-<FNV-1a 32 of the name, 8 hex digits>
 * sf-reply/<r>           a client's answers: r is the client's random reply slot, its own
 *                        subscription `sf-reply`
 * ```
 */

/** Subscription of the workers on the request topics (failover: one owner reads at a time). */
export const ASK_SUBSCRIPTION = 'sf-ask';
/** Namespace of the clients' reply topics; a client's topic is one random partition of it. */
export const ASK_REPLY_NAMESPACE = `${RESERVED_NAMESPACE_PREFIX}reply`;
/** Subscription of a client on its reply topic. */
export const ASK_REPLY_SUBSCRIPTION = 'sf-reply';
/** Reply slots are drawn in [0, 2^48 - 1): two clients of a cluster share one with odds about n^2 / 2^49. */
export const ASK_REPLY_SLOTS = 2 ** 48 - 1;

/**
 * The request a worker answers itself rather than the stage's `query` hook: the partition's
 * flow report (`readStreamFlow` of its store), what `ClusterClient.quiescence` collects. Its
 * key is in shardflow's reserved `sf.` names, which no application request uses.
 */
export const STAGE_FLOW_REQUEST: { readonly 'sf.request': 'flow' } = Object.freeze({ 'sf.request': 'flow' });

/** Whether `request` is {@link STAGE_FLOW_REQUEST} (as decoded from the wire). */
export function isStageFlowRequest(request: unknown): boolean {
  return typeof request === 'object' && request !== null && (request as Record<string, unknown>)['sf.request'] === 'flow';
}

const PLAIN = /^[a-z0-9-]+$/;
const PREFIX = `${RESERVED_NAMESPACE_PREFIX}ask-`;

/** The namespace of `stage`'s request topics: `sf-ask-<stage>`, or `sf-askx-<hash>` for a stage name that is not a namespace name. */
export function askNamespace(stage: string): string {
  if (PLAIN.test(stage) && PREFIX.length + stage.length <= 64) return `${PREFIX}${stage}`;
  return `${RESERVED_NAMESPACE_PREFIX}askx-${fnv1a32(stage).toString(16).padStart(8, '0')}`;
}

/** The request topic of partition `partition` of `stage`. */
export function askTopic(stage: string, partition: number): Topic {
  return topic(askNamespace(stage), partitionId(partition));
}

/** The reply topic of reply slot `slot`. */
export function replyTopic(slot: number): Topic {
  return topic(ASK_REPLY_NAMESPACE, partitionId(slot));
}

/**
 * Stages whose request namespaces collide (two hashed names with the same FNV-1a), as
 * `a and b`; undefined when every stage has its own. A cluster with such stages cannot be
 * asked remotely (`startWorker` refuses it).
 */
export function askNamespaceCollision(stages: readonly ClusterStage[]): string | undefined {
  const seen = new Map<string, string>();
  for (const s of stages) {
    const ns = askNamespace(s.name);
    const had = seen.get(ns);
    if (had !== undefined) return `${had} and ${s.name}`;
    seen.set(ns, s.name);
  }
  return undefined;
}

/** One request of a cluster client to one partition. */
export interface AskRequest {
  /** Request id (random, 32 hex digits): the reply carries it back. */
  readonly id: string;
  /** The asking client's reply slot (`replyTopic(replyTo)`). */
  readonly replyTo: number;
  readonly stage: string;
  readonly partition: number;
  /** Wall-clock ms since the epoch after which the client no longer waits: an owner that consumes it later acks it without running it. */
  readonly expiresAt: number;
  /** What `ApplicationHost.ask` gets. */
  readonly request: unknown;
}

/** An error as it travels back to the client. */
export interface AskErrorInfo {
  readonly name: string;
  /** The `code` of a ShardflowError (or of any error that has a string code); absent otherwise. */
  readonly code?: string;
  readonly message: string;
}

/** What a worker sends back for one request. */
export type AskReply =
  | { readonly id: string; readonly worker: string; readonly ok: true; readonly answer: unknown }
  | { readonly id: string; readonly worker: string; readonly ok: false; readonly error: AskErrorInfo };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;
const REQUEST_ID = /^[0-9a-f]{32}$/;

function isAskRequest(v: unknown): v is AskRequest {
  if (!isObject(v)) throw new Error('not a map');
  if (typeof v.id !== 'string' || !REQUEST_ID.test(v.id)) throw new Error('id is not 32 hex digits');
  if (!Number.isSafeInteger(v.replyTo) || (v.replyTo as number) < 0) throw new Error('replyTo is not a reply slot');
  if (typeof v.stage !== 'string' || !Number.isInteger(v.partition) || (v.partition as number) < 0) throw new Error('no stage and partition');
  if (typeof v.expiresAt !== 'number') throw new Error('no expiresAt');
  if (!('request' in v)) throw new Error('no request');
  return true;
}

function isAskReply(v: unknown): v is AskReply {
  if (!isObject(v) || typeof v.id !== 'string' || typeof v.worker !== 'string') throw new Error('no id or worker');
  if (v.ok === true) return 'answer' in v;
  if (v.ok !== false || !isObject(v.error) || typeof v.error.name !== 'string' || typeof v.error.message !== 'string') throw new Error('neither an answer nor an error');
  return true;
}

/**
 * msgpack codec of requests (the framework's codec: a foreign or corrupt payload decodes to
 * UndecodableMessageError). A bigint in a request or an answer arrives as a bigint, as a
 * `running.ask` in one process gives it (a query hook's int64 counters), not as a number
 * that loses precision above 2^53.
 */
export const askRequestCodec: Codec<AskRequest> = msgpackCodec('AskRequest', isAskRequest, { int64: 'bigint' });
/** msgpack codec of replies (bigints kept, as requests'). */
export const askReplyCodec: Codec<AskReply> = msgpackCodec('AskReply', isAskReply, { int64: 'bigint' });

/** `err` as it travels in a reply: its name, string code and message. */
export function askErrorInfo(err: unknown): AskErrorInfo {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return { name: err.name, ...(typeof code === 'string' ? { code } : {}), message: err.message };
  }
  return { name: 'Error', message: String(err) };
}
