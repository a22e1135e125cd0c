import { BrokerDisconnectedError, InvalidArgumentError } from '../../../errors.js';
import { topicPath, type PulsarTopicName } from './names.js';

/** Answer of the admin API that was not 2xx. `status` is the HTTP status. */
export class PulsarAdminError extends BrokerDisconnectedError {
  override readonly code: string = 'SF_ERR_PULSAR_ADMIN';
  constructor(readonly status: number, message: string) {
    super(message);
    this.name = 'PulsarAdminError';
  }
}

/** Pulsar's topic domains: durable (`persistent://`) or kept in broker memory only (`non-persistent://`). */
export type TopicDomain = 'persistent' | 'non-persistent';

/** The part of a topic's admin statistics that tells whether clients are connected. */
export interface TopicStats {
  readonly publishers?: readonly { readonly producerName?: string }[];
  readonly subscriptions?: Readonly<Record<string, { readonly consumers?: readonly { readonly consumerName?: string }[]; readonly msgBacklog?: number }>>;
}

/**
 * `persistent/tenant/ns/local` (each segment URL-encoded) of a full topic name
 * `persistent://tenant/ns/local` (or `non-persistent://...`).
 * @throws InvalidArgumentError for anything else
 */
export function adminTopicPath(topic: string): string {
  const m = /^(persistent|non-persistent):\/\/([^/]+)\/([^/]+)\/(.+)$/.exec(topic);
  if (!m) throw new InvalidArgumentError(`not a full pulsar topic name: ${JSON.stringify(topic)}`);
  return m.slice(1).map(encodeURIComponent).join('/');
}

/**
 * Pulsar's REST admin API (`/admin/v2`), the few calls the broker needs: tenants,
 * namespaces, topics, subscriptions, topic statistics, and deleting them (`shardflow clean`,
 * ../scope.ts). Creation calls are idempotent (409 Conflict counts as done).
 */
export class PulsarAdmin {
  /** @param webUrl e.g. `http://127.0.0.1:8080`. @param timeoutMs per request. */
  constructor(readonly webUrl: string, readonly timeoutMs = 10_000) {}

  /** Cluster names (`GET /admin/v2/clusters`). */
  async clusters(): Promise<string[]> {
    return (await this.#request('GET', '/admin/v2/clusters')) as string[];
  }

  /** Creates `tenant` allowed on every cluster, unless it exists. */
  async ensureTenant(tenant: string): Promise<void> {
    const allowedClusters = await this.clusters();
    await this.#request('PUT', `/admin/v2/tenants/${encodeURIComponent(tenant)}`, { adminRoles: [], allowedClusters }, [409]);
  }

  /** Creates `tenant/namespace` unless it exists. */
  async ensureNamespace(tenant: string, namespace: string): Promise<void> {
    await this.#request('PUT', `/admin/v2/namespaces/${encodeURIComponent(tenant)}/${encodeURIComponent(namespace)}`, undefined, [409]);
  }

  /** Creates a non-partitioned topic unless it exists. */
  async ensureTopic(t: PulsarTopicName): Promise<void> {
    await this.#request('PUT', `/admin/v2/${topicPath(t)}`, undefined, [409]);
  }

  /**
   * Creates durable subscription `name` on `t` at the earliest message unless it exists (a
   * subscription nobody reads keeps messages retained).
   */
  async ensureSubscription(t: PulsarTopicName, name: string): Promise<void> {
    await this.#request(
      'PUT',
      `/admin/v2/${topicPath(t)}/subscription/${encodeURIComponent(name)}`,
      { ledgerId: -1, entryId: -1, partitionIndex: -1 },
      [409],
    );
  }

  /**
   * The properties of subscription `name` on `t` (Pulsar >= 2.11; persisted with the cursor),
   * or undefined when the topic or subscription does not exist.
   */
  async subscriptionProperties(t: PulsarTopicName, name: string): Promise<Record<string, string> | undefined> {
    return (await this.#request('GET', `/admin/v2/${topicPath(t)}/subscription/${encodeURIComponent(name)}/properties`, undefined, [404])) as
      | Record<string, string>
      | undefined;
  }

  /** Replaces the properties of subscription `name` on `t`. */
  async setSubscriptionProperties(t: PulsarTopicName, name: string, properties: Record<string, string>): Promise<void> {
    await this.#request('PUT', `/admin/v2/${topicPath(t)}/subscription/${encodeURIComponent(name)}/properties`, properties);
  }

  /**
   * Topic-level backlog quota (topic policies, on by default since Pulsar 3.0): once the
   * backlog of `t` exceeds `limitBytes`, Pulsar drops its oldest messages
   * (`consumer_backlog_eviction`) at its next quota check (`backlogQuotaCheckIntervalInSeconds`,
   * 60 s by default), at ledger granularity.
   */
  async setBacklogQuota(t: PulsarTopicName, limitBytes: number): Promise<void> {
    await this.#request('POST', `/admin/v2/${topicPath(t)}/backlogQuota?backlogQuotaType=destination_storage`, {
      limitSize: limitBytes,
      limitTime: -1,
      policy: 'consumer_backlog_eviction',
    });
  }

  /** Entries retained in `t`'s ledgers, or undefined when the topic does not exist. */
  async retainedEntries(t: PulsarTopicName): Promise<number | undefined> {
    const stats = (await this.#request('GET', `/admin/v2/${topicPath(t)}/internalStats`, undefined, [404])) as
      | { numberOfEntries?: number }
      | undefined;
    return stats === undefined ? undefined : (stats.numberOfEntries ?? 0);
  }

  /** Tenant names (`GET /admin/v2/tenants`). */
  async tenants(): Promise<string[]> {
    return (await this.#request('GET', '/admin/v2/tenants')) as string[];
  }

  /** Namespaces of `tenant` as `tenant/namespace`; [] when the tenant does not exist. */
  async namespaces(tenant: string): Promise<string[]> {
    return ((await this.#request('GET', `/admin/v2/namespaces/${encodeURIComponent(tenant)}`, undefined, [404])) as string[] | undefined) ?? [];
  }

  /**
   * Full names (`persistent://tenant/ns/local`) of the topics of `tenant/namespace` in
   * `domain`: with `partitioned` the partitioned topics (not their `-partition-<i>` parts),
   * else every non-partitioned topic and partition (system topics excluded). [] when the
   * namespace does not exist.
   */
  async topics(domain: TopicDomain, tenant: string, namespace: string, partitioned = false): Promise<string[]> {
    const path = `/admin/v2/${domain}/${encodeURIComponent(tenant)}/${encodeURIComponent(namespace)}${partitioned ? '/partitioned' : ''}`;
    return ((await this.#request('GET', path, undefined, [404])) as string[] | undefined) ?? [];
  }

  /**
   * Statistics of a topic given by full name: its connected publishers and, per
   * subscription, its connected consumers (`/stats`, or `/partitioned-stats` summed over the
   * partitions). Undefined when the topic does not exist.
   */
  async topicStats(topic: string, partitioned = false): Promise<TopicStats | undefined> {
    return (await this.#request('GET', `/admin/v2/${adminTopicPath(topic)}/${partitioned ? 'partitioned-stats' : 'stats'}`, undefined, [404])) as TopicStats | undefined;
  }

  /**
   * Deletes a topic given by full name, with `force=true`: its producers and consumers are
   * disconnected and its subscriptions deleted; `partitioned` deletes a partitioned topic
   * with all its partitions. @returns false when it did not exist
   */
  async deleteTopic(topic: string, partitioned = false): Promise<boolean> {
    const { status } = await this.#send('DELETE', `/admin/v2/${adminTopicPath(topic)}${partitioned ? '/partitions' : ''}?force=true`, undefined, [404]);
    return status !== 404;
  }

  /**
   * Deletes an empty namespace (its system topic `__change_events` goes with it).
   * @returns false when it did not exist
   * @throws PulsarAdminError 409 when it still holds topics (a connected client recreated one)
   */
  async deleteNamespace(tenant: string, namespace: string): Promise<boolean> {
    const { status } = await this.#send('DELETE', `/admin/v2/namespaces/${encodeURIComponent(tenant)}/${encodeURIComponent(namespace)}`, undefined, [404]);
    return status !== 404;
  }

  /**
   * Deletes a tenant without namespaces. @returns false when it did not exist
   * @throws PulsarAdminError 409 when it still has namespaces
   */
  async deleteTenant(tenant: string): Promise<boolean> {
    const { status } = await this.#send('DELETE', `/admin/v2/tenants/${encodeURIComponent(tenant)}`, undefined, [404]);
    return status !== 404;
  }

  /**
   * One request. Statuses in `tolerated` resolve with undefined.
   * @throws PulsarAdminError on other non-2xx answers; BrokerDisconnectedError when unreachable;
   *   InvalidArgumentError on 400/412 (a name Pulsar refuses).
   */
  async #request(method: string, path: string, body?: unknown, tolerated: number[] = []): Promise<unknown> {
    return (await this.#send(method, path, body, tolerated)).body;
  }

  /** `#request`, also giving the answer's HTTP status (body undefined for a tolerated one). */
  async #send(method: string, path: string, body?: unknown, tolerated: number[] = []): Promise<{ status: number; body: unknown }> {
    let res: Response;
    try {
      res = await fetch(this.webUrl + path, {
        method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      throw new BrokerDisconnectedError(`pulsar admin ${method} ${path}: ${(err as Error).message}`, { cause: err });
    }
    const text = await res.text();
    if (tolerated.includes(res.status)) return { status: res.status, body: undefined };
    if (res.status === 400 || res.status === 412) throw new InvalidArgumentError(`pulsar admin ${method} ${path}: ${res.status} ${text}`);
    if (!res.ok) throw new PulsarAdminError(res.status, `pulsar admin ${method} ${path}: ${res.status} ${text}`);
    return { status: res.status, body: text.length > 0 ? JSON.parse(text) : undefined };
  }
}
