// A query API read of a web-index partition that no worker runs (docs/cluster.md, "Queries
// during a move"): the remote read gives up after its own timeout (`remotePartitionView`'s
// `timeoutMs`, default 60 s), not the cluster client's 10-minute default, and the query
// service does not ask again: the HTTP answer is 503 `unavailable`, naming the partition, and
// exactly one request was published on the partition's request topic. Real Redis Streams (the
// cluster's coordination and broker), no worker: every unit is unowned.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ActorStoppedError, systemClock } from '../src/index.js';
import { askTopic } from '../src/cluster/askWire.js';
import { hostPartitioner } from '../src/actors/partition/hostPartitioner.js';
import { QueryService } from '../src/query/queryService.js';
import { remotePartitionView } from '../src/query/remoteView.js';
import { startQueryServer } from '../src/query/server.js';
import { WEB_INDEX_STAGE } from '../src/topology/clusterProtocol.js';
import { skipWithoutRedis } from './kit/cluster.js';
import { withWebIndexCluster } from './kit/webIndexCluster.js';

const PARTITIONS = 4;
const READ_TIMEOUT_MS = 400;

test('a read of a partition nobody runs answers 503 after the read timeout, asked once (not retried, not the 10-minute ask timeout)', { timeout: 60_000 }, async (t) => {
  if (await skipWithoutRedis(t)) return;
  await withWebIndexCluster(t, { partitions: PARTITIONS, leaseMs: 3000 }, async (c) => {
    const client = await c.client();
    const partitioner = hostPartitioner(PARTITIONS);
    const url = 'http://unowned.example/a.html';
    const p = partitioner.forUrl(url);
    const service = new QueryService({ partitioner, view: async (q) => remotePartitionView(client, q, { timeoutMs: READ_TIMEOUT_MS }), clock: systemClock });

    await assert.rejects(service.page(url), (err: unknown) => {
      assert.ok(err instanceof ActorStoppedError, String(err));
      assert.equal((err as { terminal?: unknown }).terminal, true, 'terminal: the query service does not ask again');
      assert.match(err.message, new RegExp(`partition ${p} of the web index answered no page read within ${READ_TIMEOUT_MS} ms`));
      return true;
    });

    const server = await startQueryServer({ service, port: 0 });
    try {
      const res = await fetch(`${server.url}/v1/outlinks?url=${encodeURIComponent(url)}`);
      const body = (await res.json()) as { error: string; reason: string };
      assert.equal(res.status, 503, JSON.stringify(body));
      assert.equal(body.error, 'unavailable');
      assert.match(body.reason, new RegExp(`partition ${p} of the web index answered no (page|outlinks) read within ${READ_TIMEOUT_MS} ms`));
    } finally {
      await server.close();
    }

    // Each read was published once: the page query's page read and summary read (its first
    // call computes the summary of every partition), then the outlinks query's page and outlinks reads.
    const broker = await c.broker();
    const requests = await broker.subscribe(askTopic(WEB_INDEX_STAGE, p), { subscription: 'test-count', type: 'exclusive' });
    try {
      const seen = [];
      for (let got = await requests.receive(100, 1000); got.length > 0; got = await requests.receive(100, 1000)) seen.push(...got);
      assert.equal(seen.length, 4, `requests on ${askTopic(WEB_INDEX_STAGE, p).namespace}/${p}: ${seen.length}`);
    } finally {
      await requests.close();
    }
  });
});
