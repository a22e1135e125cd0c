import { Redis } from 'ioredis';
import { BrokerDisconnectedError, InvalidArgumentError, isShardflowError, ShardflowError } from '../../errors.js';
import { RUN_ID_PATTERN, SCOPE_FAMILY, type BrokerIdentity } from './identity.js';
import { PulsarAdmin, PulsarAdminError, type TopicDomain } from './pulsar/admin.js';

/**
 * A broker scope's contents and their removal: every Redis key under a run's key prefix, or
 * every topic, namespace and the tenant of a run's Pulsar tenant (see `BrokerIdentity`,
 * ./identity.ts). Used by `shardflow clean` and by jobs that drop a scope they no longer
 * need (a temp data dir's, or the old one after a repair switched scope).
 *
 * ```
 * redis  sf:1a2b3c4d:   SCAN MATCH sf:1a2b3c4d:* COUNT 1000, UNLINK each batch
 *                       (streams links/3, dead letters links/3:<sub>:dlq, ready/lock/meta/alive keys)
 * pulsar shardflow-1a2b3c4d   per namespace: delete its partitioned and non-partitioned topics,
 *                       persistent and non-persistent, dead-letter topics <p>-<sub>-DLQ included
 *                       (force: clients disconnected, subscriptions deleted); then the namespace;
 *                       then the tenant
 * ```
 */

/** Options of the scope functions. */
export interface BrokerScopeOptions {
  /** Redis connect timeout, and Pulsar admin timeout per request, in ms. Default 10000. */
  readonly timeoutMs?: number;
  /** Redis: the SCAN COUNT hint, which also bounds an UNLINK batch (keys). Default 1000. */
  readonly batch?: number;
}

/** What `deleteBrokerScope` removed. */
export interface BrokerScopeRemoval {
  /** Redis keys unlinked (0 on Pulsar, which has no keys). */
  readonly keys: number;
  /**
   * Topics deleted, dead-letter topics included: on Redis the topic streams
   * `<prefix><ns>/<p>` and dead-letter streams `<prefix><ns>/<p>:<sub>:dlq`; on Pulsar each
   * non-partitioned topic, and each partitioned topic once.
   */
  readonly topics: number;
  /** Messages the deleted dead-letter topics held (Redis XLEN, Pulsar retained entries). */
  readonly deadLetters: number;
}

/** What a scope holds now (`describeBrokerScope`). */
export interface BrokerScopeContents extends BrokerScopeRemoval {
  /**
   * The clients connected to it, one line each, e.g. `links/3 subscription backlinks:
   * consumer c-12ab` (Redis: consumers whose liveness key has not expired, which a killed
   * consumer's does within its `deadAfterMs`, 5 s by default; Pulsar: connected producers
   * and consumers). Non-empty means a job probably runs on it: deleting the scope then loses
   * its messages and its clients recreate topics.
   */
  readonly live: readonly string[];
}

/**
 * Clients are connected to a scope that was to be removed (a job runs on it), or a Pulsar
 * namespace still held topics after they were deleted (a connected client recreated them).
 * Not everything may have been removed; the message names what is in use.
 */
export class BrokerScopeInUseError extends ShardflowError {
  override readonly code: string = 'SF_ERR_SCOPE_IN_USE';
  constructor(message = 'the broker scope is in use', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BrokerScopeInUseError';
  }
}

const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_BATCH = 1000;

/**
 * Removes every key (Redis) or topic, namespace and the tenant (Pulsar) of `identity`'s
 * scope; see the table at the top of this file. Idempotent: a scope that is gone, or never
 * existed, gives zeros. The in-memory broker keeps nothing after a run: zeros. It does not
 * look for connected clients (call `describeBrokerScope` first for that): on Redis their
 * keys are removed as any other, on Pulsar they are disconnected.
 * @returns counts of what was removed (`BrokerScopeRemoval`)
 * @throws InvalidArgumentError for an unknown kind, a url of another scheme, a missing or
 *   empty scope, or a Redis scope that covers every run's scope (`sf:`)
 * @throws BrokerDisconnectedError when the broker does not answer within `timeoutMs`
 * @throws BrokerScopeInUseError (Pulsar) when a namespace or the tenant cannot be deleted
 *   because a connected client recreated a topic in it
 * @throws PulsarAdminError on other refusals of the admin API
 */
export async function deleteBrokerScope(identity: BrokerIdentity, options: BrokerScopeOptions = {}): Promise<BrokerScopeRemoval> {
  const target = checkIdentity(identity);
  if (target.kind === 'memory') return { keys: 0, topics: 0, deadLetters: 0 };
  if (target.kind === 'redis') return withRedis(target.url, options, (redis) => redisScope(redis, target.scope, options, true));
  return pulsarDelete(new PulsarAdmin(pulsarWebUrl(target.url), options.timeoutMs ?? DEFAULT_TIMEOUT_MS), target.scope);
}

/**
 * What `identity`'s scope holds now, and the clients connected to it (the same counts as
 * `deleteBrokerScope` would report). Zeros for the in-memory broker.
 * @throws as `deleteBrokerScope`, except BrokerScopeInUseError
 */
export async function describeBrokerScope(identity: BrokerIdentity, options: BrokerScopeOptions = {}): Promise<BrokerScopeContents> {
  const target = checkIdentity(identity);
  if (target.kind === 'memory') return { keys: 0, topics: 0, deadLetters: 0, live: [] };
  if (target.kind === 'redis') return withRedis(target.url, options, (redis) => redisScope(redis, target.scope, options, false));
  return pulsarDescribe(new PulsarAdmin(pulsarWebUrl(target.url), options.timeoutMs ?? DEFAULT_TIMEOUT_MS), target.scope);
}

/**
 * The run scopes on the broker at `url` (`redis://...` or `pulsar://...`): Redis key
 * prefixes `<family><run>:` that some key starts with, or Pulsar tenants `<family><run>`,
 * `<run>` being 8 hex digits (RUN_ID_PATTERN), sorted. `family` defaults to the CLI's
 * (SCOPE_FAMILY: `sf:`, `shardflow-`). Scopes of other shapes (the library's default `sf:`
 * prefix and `shardflow` tenant, tests' own) are never listed.
 * @throws InvalidArgumentError for another scheme or an empty family
 * @throws BrokerDisconnectedError when the broker does not answer
 */
export async function listBrokerScopes(url: string, options: BrokerScopeOptions & { readonly family?: string } = {}): Promise<string[]> {
  const kind = brokerKind(url);
  const family = options.family ?? SCOPE_FAMILY[kind];
  if (family.length === 0) throw new InvalidArgumentError('the scope family must not be empty');
  if (kind === 'redis') {
    const shape = new RegExp(`^${escapeRegExp(family)}${RUN_ID_PATTERN}:`);
    return withRedis(url, options, async (redis) => {
      const found = new Set<string>();
      await scanKeys(redis, `${escapeGlob(family)}*`, options.batch ?? DEFAULT_BATCH, async (keys) => {
        for (const k of keys) {
          const m = shape.exec(k);
          if (m) found.add(m[0]);
        }
      });
      return [...found].sort();
    });
  }
  const shape = new RegExp(`^${escapeRegExp(family)}${RUN_ID_PATTERN}$`);
  const admin = new PulsarAdmin(pulsarWebUrl(url), options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  return (await admin.tenants()).filter((t) => shape.test(t)).sort();
}

/**
 * The broker kind of a `--broker` address: `redis` (`redis://`) or `pulsar` (`pulsar://`).
 * @throws InvalidArgumentError otherwise
 */
export function brokerKind(url: string): 'redis' | 'pulsar' {
  if (url.startsWith('redis://')) return 'redis';
  if (url.startsWith('pulsar://')) return 'pulsar';
  throw new InvalidArgumentError(`not a redis:// or pulsar:// broker address: ${JSON.stringify(url)}`);
}

/** The HTTP address of Pulsar's admin API for `pulsar://host:port` (the port is Pulsar's web port, as `--broker` takes it). */
export function pulsarWebUrl(url: string): string {
  return `http://${url.slice('pulsar://'.length).replace(/\/+$/, '')}`;
}

type Target = { kind: 'memory' } | { kind: 'redis' | 'pulsar'; url: string; scope: string };

/** Checks an identity before anything is removed. @throws InvalidArgumentError (see deleteBrokerScope) */
function checkIdentity(identity: BrokerIdentity): Target {
  if (identity.kind === 'memory') return { kind: 'memory' };
  if (identity.kind !== 'redis' && identity.kind !== 'pulsar') throw new InvalidArgumentError(`unknown broker kind ${JSON.stringify(identity.kind)}`);
  const { url, scope } = identity;
  if (!url || brokerKind(url) !== identity.kind) throw new InvalidArgumentError(`a ${identity.kind} broker identity needs a ${identity.kind}:// url, got ${JSON.stringify(url)}`);
  if (!scope) throw new InvalidArgumentError(`a ${identity.kind} broker identity needs a scope (${identity.kind === 'redis' ? 'key prefix' : 'tenant'})`);
  if (identity.kind === 'redis' && SCOPE_FAMILY.redis.startsWith(scope)) {
    throw new InvalidArgumentError(`redis scope ${JSON.stringify(scope)} covers the scope of every run: give one run's key prefix (${SCOPE_FAMILY.redis}<run>:)`);
  }
  return { kind: identity.kind, url, scope };
}

/** Runs `body` on a fresh ioredis connection to `url`. @throws BrokerDisconnectedError when Redis does not answer */
async function withRedis<T>(url: string, options: BrokerScopeOptions, body: (redis: Redis) => Promise<T>): Promise<T> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const redis = new Redis(url, { lazyConnect: true, connectTimeout: timeoutMs, maxRetriesPerRequest: 1, retryStrategy: () => null });
  let lastError: Error | undefined;
  redis.on('error', (err: Error) => (lastError = err));
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      redis.connect(),
      new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs))),
    ]);
  } catch (err) {
    redis.disconnect();
    throw new BrokerDisconnectedError(`cannot reach redis at ${url}: ${(lastError ?? (err as Error)).message}`, { cause: err });
  } finally {
    clearTimeout(timer);
  }
  try {
    return await body(redis);
  } catch (err) {
    if (isShardflowError(err)) throw err;
    throw new BrokerDisconnectedError(`redis at ${url}: ${(err as Error).message}`, { cause: err });
  } finally {
    redis.disconnect();
  }
}

/** SCAN MATCH `pattern` to the end, handing each non-empty batch to `visit` (a key may come twice: SCAN's guarantee). */
async function scanKeys(redis: Redis, pattern: string, count: number, visit: (keys: string[]) => Promise<void>): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', count);
    cursor = next;
    if (keys.length > 0) await visit(keys);
  } while (cursor !== '0');
}

/**
 * Counts (and with `remove` unlinks) the keys under `prefix`. Key shapes: src/runtime/brokers/redis/keys.ts.
 * UNLINK frees the values in the background, so a large stream does not block the server.
 */
async function redisScope(redis: Redis, prefix: string, options: BrokerScopeOptions, remove: boolean): Promise<BrokerScopeContents> {
  const p = escapeRegExp(prefix);
  const topicKey = new RegExp(`^${p}[^:]+/\\d+$`);
  const deadLetterKey = new RegExp(`^${p}[^:]+/\\d+:.+:dlq$`);
  const aliveKey = new RegExp(`^${p}([^:]+/\\d+):(.+):alive:([^:]+)$`);
  const seen = new Set<string>();
  let keys = 0;
  let topics = 0;
  let deadLetters = 0;
  const live: string[] = [];
  await scanKeys(redis, `${escapeGlob(prefix)}*`, options.batch ?? DEFAULT_BATCH, async (batch) => {
    const fresh = batch.filter((k) => !seen.has(k));
    if (fresh.length === 0) return;
    for (const k of fresh) seen.add(k);
    const dlqs = fresh.filter((k) => deadLetterKey.test(k));
    topics += fresh.filter((k) => topicKey.test(k)).length + dlqs.length;
    for (const n of await Promise.all(dlqs.map((k) => redis.xlen(k).catch(() => 0)))) deadLetters += n;
    if (remove) {
      keys += await redis.unlink(...fresh);
    } else {
      keys += fresh.length;
      for (const k of fresh) {
        const m = aliveKey.exec(k);
        if (m) live.push(`${m[1]} subscription ${m[2]}: consumer ${m[3]}`);
      }
    }
  });
  return { keys, topics, deadLetters, live: live.sort() };
}

const DOMAINS: readonly TopicDomain[] = ['persistent', 'non-persistent'];

/** The local name of a full topic name (`persistent://t/ns/local` -> `local`). */
function localName(topic: string): string {
  return topic.split('/').slice(4).join('/');
}

/** Deletes every topic of `tenant/namespace`. @returns topics deleted and the dead letters they held */
async function pulsarDeleteTopics(admin: PulsarAdmin, tenant: string, namespace: string): Promise<{ topics: number; deadLetters: number }> {
  let topics = 0;
  let deadLetters = 0;
  const count = async (domain: TopicDomain, topic: string): Promise<void> => {
    if (domain === 'persistent' && localName(topic).endsWith('-DLQ')) {
      deadLetters += (await admin.retainedEntries({ tenant, namespace, local: localName(topic) })) ?? 0;
    }
  };
  for (const domain of DOMAINS) {
    for (const topic of await admin.topics(domain, tenant, namespace, true)) {
      if (await admin.deleteTopic(topic, true)) topics++;
    }
    // Listed after the partitioned ones are gone, so their `-partition-<i>` parts are not counted twice.
    for (const topic of await admin.topics(domain, tenant, namespace)) {
      await count(domain, topic);
      if (await admin.deleteTopic(topic)) topics++;
    }
  }
  return { topics, deadLetters };
}

/** Deletes the topics, namespaces and the tenant `tenant`. */
async function pulsarDelete(admin: PulsarAdmin, tenant: string): Promise<BrokerScopeRemoval> {
  let topics = 0;
  let deadLetters = 0;
  for (const qualified of await admin.namespaces(tenant)) {
    const namespace = qualified.slice(tenant.length + 1);
    // Two passes: a client that was connected may recreate a topic right after its deletion.
    for (let pass = 1; ; pass++) {
      const removed = await pulsarDeleteTopics(admin, tenant, namespace);
      topics += removed.topics;
      deadLetters += removed.deadLetters;
      try {
        await admin.deleteNamespace(tenant, namespace);
        break;
      } catch (err) {
        if (!(err instanceof PulsarAdminError && err.status === 409) || pass === 2) throw inUse(err, `pulsar namespace ${qualified}`);
      }
    }
  }
  try {
    await admin.deleteTenant(tenant);
  } catch (err) {
    throw inUse(err, `pulsar tenant ${tenant}`);
  }
  return { keys: 0, topics, deadLetters };
}

/** A 409 of the admin API as BrokerScopeInUseError; anything else unchanged. */
function inUse(err: unknown, what: string): unknown {
  if (!(err instanceof PulsarAdminError && err.status === 409)) return err;
  return new BrokerScopeInUseError(
    `${what} is not empty after its topics were deleted: a connected producer or consumer (a running job) recreated a topic. Stop the job, then clean again.`,
    { cause: err },
  );
}

/** Counts the topics of `tenant` and lists their connected clients. */
async function pulsarDescribe(admin: PulsarAdmin, tenant: string): Promise<BrokerScopeContents> {
  let topics = 0;
  let deadLetters = 0;
  const live: string[] = [];
  for (const qualified of await admin.namespaces(tenant)) {
    const namespace = qualified.slice(tenant.length + 1);
    for (const domain of DOMAINS) {
      const partitioned = await admin.topics(domain, tenant, namespace, true);
      const parts = new RegExp(`^(${partitioned.map(escapeRegExp).join('|')})-partition-\\d+$`);
      const plain = (await admin.topics(domain, tenant, namespace)).filter((t) => partitioned.length === 0 || !parts.test(t));
      for (const [topic, isPartitioned] of [...partitioned.map((t) => [t, true] as const), ...plain.map((t) => [t, false] as const)]) {
        topics++;
        const local = localName(topic);
        if (domain === 'persistent' && !isPartitioned && local.endsWith('-DLQ')) deadLetters += (await admin.retainedEntries({ tenant, namespace, local })) ?? 0;
        const stats = await admin.topicStats(topic, isPartitioned);
        const name = `${namespace}/${local}`;
        for (const p of stats?.publishers ?? []) live.push(`${name}: producer ${p.producerName ?? '?'}`);
        for (const [sub, s] of Object.entries(stats?.subscriptions ?? {})) {
          for (const c of s.consumers ?? []) live.push(`${name} subscription ${sub}: consumer ${c.consumerName ?? '?'}`);
        }
      }
    }
  }
  return { keys: 0, topics, deadLetters, live: live.sort() };
}

/** `s` with Redis glob specials (`* ? [ ] \`) escaped, for SCAN MATCH. */
function escapeGlob(s: string): string {
  return s.replace(/[*?[\]\\]/g, '\\$&');
}

/** `s` as a literal inside a RegExp. */
function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
