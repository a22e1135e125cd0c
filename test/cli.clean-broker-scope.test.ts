import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import type { Broker, Consumer } from '../src/runtime/brokers/broker.js';
import type { BrokerIdentity } from '../src/runtime/brokers/identity.js';
import { PulsarAdmin } from '../src/runtime/brokers/pulsar/admin.js';
import { PulsarBroker } from '../src/runtime/brokers/pulsar/broker.js';
import { RedisStreamsBroker } from '../src/runtime/brokers/redis-streams.js';
import { deleteBrokerScope } from '../src/runtime/brokers/scope.js';
import { partitionId, producerId } from '../src/runtime/ids.js';
import { topic } from '../src/runtime/topics.js';
import { Namespaces } from '../src/actors/namespaces.js';
import { RECORD_FILE, type DataDirRecord } from '../src/topology/dataDir.js';
import { eventually, pulsarUnavailable } from './kit/brokers.js';
import { TOPOLOGY_RECORD_FILE, type TopologyRecord } from '../src/index.js';

// `shardflow clean` against the real Redis and Pulsar: a data dir's broker scope (keys,
// streams, consumer groups, dead letters; Pulsar topics, subscriptions, dead-letter topics,
// namespaces, tenant) is gone afterwards, other scopes are untouched, and it refuses with a
// reason (another broker, no record, clients connected). Every scope here is named
// `sftest-clean-<pid>...`, so nothing of other runs on the shared servers is touched.

const redisUrl = process.env.SHARDFLOW_REDIS_URL ?? 'redis://127.0.0.1:6379';
const pulsarWeb = process.env.SHARDFLOW_PULSAR_URL ?? 'http://127.0.0.1:8080';
const pulsarUrl = `pulsar://${pulsarWeb.replace(/^https?:\/\//, '')}`;
const bin = path.resolve('bin/shardflow.mjs');
const DEADLINE = 30_000;

interface CliResult {
  readonly status: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `node bin/shardflow.mjs ...args` without blocking this process (its consumers keep heartbeating). */
function cli(args: readonly string[]): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 120_000 }, (err, stdout, stderr) => {
      const status = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ status, stdout, stderr });
    });
  });
}

/** A run id as the CLI makes them: 8 hex digits. */
const runId = (): string => randomBytes(4).toString('hex');

/** A data dir holding only a record file that names `broker` (what `clean` reads). */
function recordDir(root: string, name: string, broker: BrokerIdentity): string {
  const dir = path.join(root, name);
  mkdirSync(dir);
  const record: DataDirRecord = { format: 1, partitions: 1, partitioner: 'fnv1a-host/1', broker, state: 'quiet', repairing: false, runs: 1, updatedAt: new Date().toISOString() };
  writeFileSync(path.join(dir, RECORD_FILE), JSON.stringify(record));
  return dir;
}

/**
 * Gives a scope what a run leaves: on `links/p` two messages, one acked and one nacked past
 * maxRedeliveries 0 (a dead letter); on `metrics/p` one message, acked; a subscription
 * `sub` (consumer group) on each. Closes its consumers.
 */
async function populate(b: Broker, p: number): Promise<void> {
  const send = async (t: ReturnType<typeof topic>, n: number): Promise<void> => {
    const producer = await b.producer(t, { producer: producerId('clean-test') });
    for (let i = 0; i < n; i++) await producer.send(new TextEncoder().encode(`m${i}`));
    await producer.flush();
    await producer.close();
  };
  const links = topic(Namespaces.links, partitionId(p));
  const metrics = topic(Namespaces.metrics, partitionId(p));
  const options = { subscription: 'sub', type: 'shared', maxRedeliveries: 0, nackRedeliveryDelayMs: 50 } as const;
  const cl = await b.subscribe(links, options);
  const cm = await b.subscribe(metrics, options);
  await send(links, 2);
  await send(metrics, 1);
  const got = await receiveN(cl, 2);
  await cl.ack(got[0]!);
  await cl.nack(got[1]!, 'poison for the clean test');
  for (const m of await receiveN(cm, 1)) await cm.ack(m);
  await eventually(
    async () => {
      for (const m of await cl.receive(1, 200)) await cl.ack(m);
      return (await b.deadLetters(links, 'sub')).length;
    },
    (n) => n === 1,
    DEADLINE,
    'the nacked message reaches the dead-letter topic',
  );
  await cl.close();
  await cm.close();
}

async function receiveN(c: Consumer, n: number): Promise<Awaited<ReturnType<Consumer['receive']>>> {
  const out: Awaited<ReturnType<Consumer['receive']>> = [];
  const end = Date.now() + DEADLINE;
  while (out.length < n && Date.now() < end) out.push(...(await c.receive(n - out.length, 1000)));
  assert.equal(out.length, n, `received ${out.length} of ${n}`);
  return out;
}

/** Fails the run instead of skipping when SHARDFLOW_REQUIRE_BROKERS=1. @returns the skip reason */
function skipReason(name: string, reason: string | undefined): string | undefined {
  if (reason && process.env.SHARDFLOW_REQUIRE_BROKERS === '1') throw new Error(`${name} is required (SHARDFLOW_REQUIRE_BROKERS=1) but unavailable: ${reason}`);
  return reason;
}

describe('shardflow clean on redis', () => {
  const family = `sftest-clean-${process.pid}:`;
  const root = mkdtempSync(path.join(tmpdir(), 'shardflow-clean-'));
  let skip: string | undefined;
  let redis: Redis;
  const scan = async (prefix: string): Promise<string[]> => {
    const keys = new Set<string>();
    let cursor = '0';
    do {
      const [next, batch] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      for (const k of batch) keys.add(k);
    } while (cursor !== '0');
    return [...keys].sort();
  };
  const connect = (prefix: string) => RedisStreamsBroker.connect({ url: redisUrl, prefix, heartbeatMs: 100, deadAfterMs: 1500, blockMs: 100, connectTimeoutMs: 2000 });
  /** A populated scope `<fam><run>:` (tests that list orphans use a family of their own). */
  const scoped = async (fam = family): Promise<string> => {
    const scope = `${fam}${runId()}:`;
    const b = await connect(scope);
    try {
      await populate(b, 0);
    } finally {
      await b.close();
    }
    return scope;
  };

  before(async () => {
    let reason: string | undefined;
    try {
      await (await connect(family)).close();
    } catch (err) {
      reason = `${(err as Error).message} (start it with scripts/redis/start.sh)`;
    }
    skip = skipReason('redis', reason);
    if (!skip) redis = new Redis(redisUrl);
  });
  after(async () => {
    if (!skip) {
      for (const k of await scan(family)) await redis.unlink(k);
      redis.disconnect();
    }
    rmSync(root, { recursive: true, force: true });
  });

  it("removes a data dir's keys, consumer groups and dead letters, and leaves another scope alone", async (t) => {
    if (skip) return t.skip(`redis unavailable: ${skip}`);
    const [mine, other] = [await scoped(), await scoped()];
    const dir = recordDir(root, 'a', { kind: 'redis', url: redisUrl, scope: mine });
    const keys = await scan(mine);
    assert.ok(keys.includes(`${mine}links/0`) && keys.includes(`${mine}links/0:sub:dlq`) && keys.includes(`${mine}metrics/0`), keys.join(' '));
    assert.equal((await redis.xinfo('GROUPS', `${mine}links/0`) as unknown[]).length, 1, 'consumer group sub');
    const untouched = await scan(other);
    assert.ok(untouched.length > 0);

    // Refusals first: nothing is removed.
    const elsewhere = await cli(['clean', '--data-dir', dir, '--broker', 'redis://127.0.0.1:1']);
    assert.equal(elsewhere.status, 2, elsewhere.stderr);
    assert.match(elsewhere.stderr, new RegExp(`ran on ${redisUrl} \\(scope ${mine}\\), not on --broker redis://127.0.0.1:1: nothing was removed`));
    const bare = path.join(root, 'no-record');
    mkdirSync(bare);
    const noRecord = await cli(['clean', '--data-dir', bare, '--remove-data']);
    assert.equal(noRecord.status, 1, noRecord.stderr);
    assert.match(noRecord.stderr, /has no record file \(shardflow\.json of a job, topology\.json of a topology\).*Nothing was removed/);
    assert.ok(existsSync(bare), 'a folder without a record is never removed');
    assert.deepEqual(await scan(mine), keys);

    const r = await cli(['clean', '--data-dir', dir, '--broker', redisUrl, '--remove-data']);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, `data dir ${dir}: scope ${mine} on ${redisUrl}: removed ${keys.length} keys (3 topics, 1 dead letter)\nremoved data dir ${dir}\n`);
    assert.deepEqual(await scan(mine), [], 'no key of the scope is left');
    assert.equal(existsSync(dir), false);
    assert.deepEqual(await scan(other), untouched, 'the other scope is untouched');
    // Idempotent: the same scope by name again removes nothing and succeeds.
    const again = await cli(['clean', '--broker', redisUrl, '--scope', mine]);
    assert.equal(again.status, 0, again.stderr);
    assert.match(again.stdout, /removed 0 topics \(0 dead letters\)/);
  });

  it("removes the scope a framework topology's data dir records (topology.json)", async (t) => {
    if (skip) return t.skip(`redis unavailable: ${skip}`);
    const mine = await scoped();
    const dir = path.join(root, 'topology');
    mkdirSync(dir);
    const record: TopologyRecord = {
      format: 1, topology: 'clicks', stages: [{ stage: 'count', namespace: 'links', partitions: 1, partitioner: 'fnv1a/1' }],
      broker: { kind: 'redis', url: redisUrl, scope: mine }, state: 'quiet', pid: process.pid, runs: 1, updatedAt: new Date().toISOString(),
    };
    writeFileSync(path.join(dir, TOPOLOGY_RECORD_FILE), JSON.stringify(record));
    const keys = await scan(mine);
    const r = await cli(['clean', '--data-dir', dir]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`data dir ${dir}: scope ${mine} on ${redisUrl}: removed ${keys.length} keys`));
    assert.deepEqual(await scan(mine), [], 'no key of the scope is left');
  });

  it('refuses a scope with connected consumers, unless --force', async (t) => {
    if (skip) return t.skip(`redis unavailable: ${skip}`);
    const scope = `${family}${runId()}:`;
    const b = await connect(scope);
    let closed = false;
    try {
      await b.subscribe(topic(Namespaces.links, partitionId(1)), { subscription: 'running', type: 'shared' });
      const before = await scan(scope);
      const r = await cli(['clean', '--broker', redisUrl, '--scope', scope]);
      assert.equal(r.status, 1, r.stderr);
      assert.match(r.stderr, new RegExp(`scope ${scope} on ${redisUrl} is in use, 1 client connected \\(links/1 subscription running: consumer [^)]+\\): a job runs on it\\. Nothing was removed`));
      assert.deepEqual(await scan(scope), before);
      const forced = await cli(['clean', '--broker', redisUrl, '--scope', scope, '--force']);
      assert.equal(forced.status, 0, forced.stderr);
      assert.match(forced.stdout, /removed \d+ keys \(1 topics, 0 dead letters\)/);
      // The consumer's group is gone with the scope (what --force warns about); closing a
      // consumer whose data was lost is clean (BrokerDataLostError is its stream's error).
      closed = true;
      await b.close();
    } finally {
      if (!closed) await b.close();
    }
  });

  it('--orphans lists the scopes no given data dir refers to, and removes them with --yes', async (t) => {
    if (skip) return t.skip(`redis unavailable: ${skip}`);
    const mine = `${family}orphans:`;
    const [kept, orphan] = [await scoped(mine), await scoped(mine)];
    const dir = recordDir(root, 'kept', { kind: 'redis', url: redisUrl, scope: kept });
    const keptKeys = await scan(kept);
    const orphanKeys = await scan(orphan);
    const list = await cli(['clean', '--broker', redisUrl, '--orphans', '--family', mine, '--data-dir', dir]);
    assert.equal(list.status, 0, list.stderr);
    assert.match(list.stdout, new RegExp(`^2 run scopes on ${redisUrl}, 1 kept by the given data dirs, 1 orphans\n`));
    assert.match(list.stdout, new RegExp(`\norphan ${orphan}: ${orphanKeys.length} keys \\(3 topics, 1 dead letter\\)\n`));
    assert.doesNotMatch(list.stdout, new RegExp(kept), 'the kept scope is not listed as an orphan');
    assert.match(list.stdout, /listed only: run again with --yes/);
    assert.deepEqual(await scan(orphan), orphanKeys, 'listing removes nothing');

    const yes = await cli(['clean', '--broker', redisUrl, '--orphans', '--yes', '--family', mine, '--data-dir', dir]);
    assert.equal(yes.status, 0, yes.stderr);
    assert.match(yes.stdout, new RegExp(`\nremoved ${orphan}: ${orphanKeys.length} keys \\(3 topics, 1 dead letter\\)\nremoved 1 scopes\n$`));
    assert.deepEqual(await scan(orphan), []);
    assert.deepEqual(await scan(kept), keptKeys, "the data dir's scope is kept");
  });
});

describe('shardflow clean on pulsar', () => {
  const family = `sftest-clean-${process.pid}-`;
  const root = mkdtempSync(path.join(tmpdir(), 'shardflow-clean-'));
  const admin = new PulsarAdmin(pulsarWeb, 15_000);
  let skip: string | undefined;
  /** Every topic of `tenant`, by namespace. */
  const topicsOf = async (tenant: string): Promise<string[]> => {
    const out: string[] = [];
    for (const ns of await admin.namespaces(tenant)) out.push(...(await admin.topics('persistent', tenant, ns.slice(tenant.length + 1))));
    return out.sort();
  };
  /** A populated tenant `<fam><run>` (the test that lists orphans uses a family of its own). */
  const scoped = async (fam = family): Promise<string> => {
    const tenant = `${fam}${runId()}`;
    const b = await PulsarBroker.connect({ webUrl: pulsarWeb, tenant, connectTimeoutMs: 15_000 });
    try {
      await populate(b, 0);
    } finally {
      await b.close();
    }
    return tenant;
  };

  before(async () => {
    skip = skipReason('pulsar', await pulsarUnavailable(pulsarWeb));
  });
  after(async () => {
    if (!skip) {
      for (const tenant of (await admin.tenants()).filter((t) => t.startsWith(family))) {
        await deleteBrokerScope({ kind: 'pulsar', url: pulsarUrl, scope: tenant }).catch(() => undefined);
      }
    }
    rmSync(root, { recursive: true, force: true });
  });

  it("removes a data dir's topics, subscriptions, dead-letter topics, namespaces and tenant, and leaves another tenant alone", async (t) => {
    if (skip) return t.skip(`pulsar unavailable: ${skip}`);
    const [mine, other] = [await scoped(), await scoped()];
    const dir = recordDir(root, 'a', { kind: 'pulsar', url: pulsarUrl, scope: mine });
    const topics = await topicsOf(mine);
    assert.deepEqual(topics, [`persistent://${mine}/links/0`, `persistent://${mine}/links/0-sub-DLQ`, `persistent://${mine}/metrics/0`]);
    assert.ok(Object.keys((await admin.topicStats(`persistent://${mine}/links/0`))?.subscriptions ?? {}).includes('sub'), 'subscription sub');
    const untouched = await topicsOf(other);
    assert.equal(untouched.length, 3);

    const elsewhere = await cli(['clean', '--data-dir', dir, '--broker', 'redis://127.0.0.1:6379']);
    assert.equal(elsewhere.status, 2, elsewhere.stderr);
    assert.match(elsewhere.stderr, /not on --broker redis:\/\/127\.0\.0\.1:6379: nothing was removed/);
    assert.deepEqual(await topicsOf(mine), topics);

    const r = await cli(['clean', '--data-dir', dir]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, `data dir ${dir}: scope ${mine} on ${pulsarUrl}: removed 3 topics (1 dead letter)\n`);
    assert.deepEqual(await admin.namespaces(mine), [], 'no namespace of the tenant is left');
    assert.equal((await admin.tenants()).includes(mine), false, 'the tenant is gone');
    assert.ok(existsSync(dir), 'the data dir stays without --remove-data');
    assert.deepEqual(await topicsOf(other), untouched, 'the other tenant is untouched');
  });

  it('refuses a tenant with a connected consumer; --orphans lists and removes with --yes', async (t) => {
    if (skip) return t.skip(`pulsar unavailable: ${skip}`);
    const mine = `${family}orphans-`;
    const [kept, orphan] = [await scoped(mine), await scoped(mine)];
    const dir = recordDir(root, 'kept', { kind: 'pulsar', url: pulsarUrl, scope: kept });
    const running = `${mine}${runId()}`;
    const b = await PulsarBroker.connect({ webUrl: pulsarWeb, tenant: running, connectTimeoutMs: 15_000 });
    try {
      await b.subscribe(topic(Namespaces.links, partitionId(1)), { subscription: 'running', type: 'shared' });
      const refused = await cli(['clean', '--broker', pulsarUrl, '--scope', running]);
      assert.equal(refused.status, 1, refused.stderr);
      assert.match(refused.stderr, new RegExp(`scope ${running} on ${pulsarUrl} is in use, 1 client connected \\(links/1 subscription running: consumer [^)]+\\)`));
      assert.deepEqual(await topicsOf(running), [`persistent://${running}/links/1`]);

      const list = await cli(['clean', '--broker', pulsarUrl, '--orphans', '--family', mine, '--data-dir', dir]);
      assert.equal(list.status, 0, list.stderr);
      assert.match(list.stdout, new RegExp(`^3 run scopes on ${pulsarUrl}, 1 kept by the given data dirs, 2 orphans\n`));
      assert.match(list.stdout, new RegExp(`\norphan ${orphan}: 3 topics \\(1 dead letter\\)\n`));
      assert.match(list.stdout, new RegExp(`\nin use ${running}: 1 topics \\(0 dead letters\\); 1 client connected .*: kept\n`));
      assert.doesNotMatch(list.stdout, new RegExp(`${kept}`));

      const yes = await cli(['clean', '--broker', pulsarUrl, '--orphans', '--yes', '--family', mine, '--data-dir', dir]);
      assert.equal(yes.status, 0, yes.stderr);
      assert.match(yes.stdout, new RegExp(`\nremoved ${orphan}: 3 topics \\(1 dead letter\\)\n`));
      assert.match(yes.stdout, /\nremoved 1 scopes\n$/);
      assert.equal((await admin.tenants()).includes(orphan), false, 'the orphan tenant is gone');
      assert.equal((await topicsOf(kept)).length, 3, "the data dir's tenant is kept");
      assert.deepEqual(await topicsOf(running), [`persistent://${running}/links/1`], 'the tenant in use is kept');
    } finally {
      await b.close();
    }
  });
});
