import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { l1Distance } from '../src/jobs/rankGraph.js';
import { readScores } from '../src/replay/graphFile.js';
import { graphs, tempDir } from './kit/datasets.js';
import { readScoresFile, runCli } from './kit/cliRun.js';

// Redis without persistence (no RDB, no AOF) killed while a rank job runs on it: the
// broker's streams and consumer groups are gone, and the messages in flight with them. The
// job must fail with that reason within a stated time (FAIL_WITHIN_MS), never hang; the
// same command again repairs the data dir from its stores and ends exactly.

const FAIL_WITHIN_MS = 60_000;

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  server.close();
  return port;
}

async function startRedis(port: number, dir: string): Promise<ChildProcess> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' });
  const redis = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on('error', () => undefined); // refused until the server listens: retried below
  for (let i = 0; ; i++) {
    try {
      await redis.connect();
      await redis.ping();
      redis.disconnect();
      return child;
    } catch (err) {
      if (i > 100) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

const hasRedisServer = spawnSync('redis-server', ['--version']).status === 0;

describe('Redis killed without persistence during a rank job', { skip: !hasRedisServer && process.env.SHARDFLOW_REQUIRE_BROKERS !== '1' ? 'no redis-server (scripts/redis/start.sh installs it)' : false }, () => {
  const tmp = tempDir('shardflow-redis-lost-');
  let redis: ChildProcess | undefined;
  after(() => {
    redis?.kill('SIGKILL');
    tmp.cleanup();
  });

  it('fails with the reason within the stated time, and the re-run repairs exactly', async () => {
    const port = await freePort();
    redis = await startRedis(port, tmp.dir);
    const spec = `redis://127.0.0.1:${port}`;
    const g = graphs.polblogs;
    const out = join(tmp.dir, 'scores.tsv');
    const args = ['rank', '--pages', join(g, 'pages.txt'), '--links', join(g, 'links.tsv'), '--out', out, '--data-dir', join(tmp.dir, 'data'), '--partitions', '8', '--broker', spec];
    // Kill Redis at the first metric round (contributions in flight), then start
    // an empty one on the same port: the job's clients reconnect to a server that lost it all.
    const t0 = Date.now();
    let loading!: () => void;
    const roundsStarted = new Promise<void>((resolve) => (loading = resolve));
    const running = runCli([...args, '--log-level', 'info'], { timeoutMs: FAIL_WITHIN_MS + 30_000, onLine: (l) => l.includes('"msg":"metric round"') && loading() });
    await roundsStarted;
    redis.kill('SIGKILL');
    await once(redis, 'exit');
    redis = await startRedis(port, tmp.dir);
    const first = await running;
    console.log(`first run: exit ${first.code} after ${((Date.now() - t0) / 1000).toFixed(1)} s: ${first.stderr.split("\n").filter((l) => l.startsWith("shardflow:")).join(" / ")}`);
    const seconds = (Date.now() - t0) / 1000;
    if (first.code === 0) {
      // The loss came after the job had everything it needed: then it must be exact.
      const l1 = l1Distance(readScoresFile(out), new Map(await readScores(join(g, 'pagerank.tsv'))));
      assert.ok(l1 <= 1e-6, `a run that exits 0 is exact (L1 ${l1})`);
    } else {
      assert.notEqual(first.code, null, `the job hung: killed after ${seconds} s`);
      assert.ok(seconds * 1000 < FAIL_WITHIN_MS + 10_000, `failed within the stated time (${seconds} s)`);
      assert.match(first.stderr, /broker lost messages this run waits for .*SF_ERR_BROKER_DATA_LOST|lost/i);
      assert.match(first.stderr, /run the same command again/);
    }

    const second = await runCli(args);
    assert.equal(second.code, 0, second.stderr.slice(-2000));
    // The first run saw the loss and recorded it: the re-run repairs, even though the
    // restarted actors had created the consumer groups again (resuming would wait forever).
    if (first.code !== 0) assert.match(second.stderr, /repaired: \d+ links sent again/);
    assert.match(second.stderr, /ranked 1489 pages, 18938 links, 18938 backlinks/);
    const l1 = l1Distance(readScoresFile(out), new Map(await readScores(join(g, 'pagerank.tsv'))));
    assert.ok(l1 <= 1e-6, `L1 ${l1} after the re-run`);
  });
});
