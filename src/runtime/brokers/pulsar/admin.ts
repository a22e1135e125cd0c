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

/**
 * Pulsar's REST admin API (`/admin/v2`), the few calls the broker needs: tenants,
 * namespaces, topics, subscriptions, topic statistics. Creation calls are idempotent (409
 * Conflict counts as done).
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

  /**
   * One request. Statuses in `tolerated` resolve with undefined.
   * @throws PulsarAdminError on other non-2xx answers; BrokerDisconnectedError when unreachable;
   *   InvalidArgumentError on 400/412 (a name Pulsar refuses).
   */
  async #request(method: string, path: string, body?: unknown, tolerated: number[] = []): Promise<unknown> {
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
    if (tolerated.includes(res.status)) return undefined;
    if (res.status === 400 || res.status === 412) throw new InvalidArgumentError(`pulsar admin ${method} ${path}: ${res.status} ${text}`);
    if (!res.ok) throw new PulsarAdminError(res.status, `pulsar admin ${method} ${path}: ${res.status} ${text}`);
    return text.length > 0 ? JSON.parse(text) : undefined;
  }
}
