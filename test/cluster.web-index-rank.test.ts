// The web index on a cluster (issue #15): `shardflow worker --web-index` processes hold the
// partitions, a client in this process ranks a graph through them (rankOnCluster: the load
// through the broker, metric rounds asked through the broker), and the result equals a
// one-process run: L1 <= 1e-6 to the reference and the same page, link and backlink counts.
// Failures: a worker SIGKILLed during the rounds and during the load, a fourth worker joining
// mid-job, a worker stopped past its lease (SIGSTOP) and resumed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { readScores } from '../src/replay/graphFile.js';
import type { StreamFlowReport } from '../src/index.js';
import { REDIS_URL, skipWithoutRedis } from './kit/cluster.js';
import { spawnWorkerProcess, until } from './kit/clusterRun.js';
import { graphs, repoRoot, tempDir } from './kit/datasets.js';
import { assertClusterRank, rankCase, withWebIndexCluster } from './kit/webIndexCluster.js';
import { openClusterQueryServer } from '../src/cli/query.js';

const PARTITIONS = 6;
const LEASE_MS = 3000;

for (const [name, dir] of [['polblogs', graphs.polblogs], ['epa', graphs.epa]] as const) {
  test(`three workers rank ${name} over Redis Streams: the one-process result`, { timeout: 300_000 }, async (t) => {
    if (await skipWithoutRedis(t)) return;
    await withWebIndexCluster(t, { partitions: PARTITIONS, leaseMs: LEASE_MS }, async (c) => {
      const ws = [await c.startWorker('w1'), await c.startWorker('w2'), await c.startWorker('w3')];
      await c.allRunningOn(ws);
      const expected = await rankCase(dir, PARTITIONS);
      if (name !== 'polblogs') {
        assertClusterRank(await c.rank(expected), expected);
      } else {
        // Two clients with different graphs at once: one is refused before it sends anything
        // (a cluster has no --update: the graphs would be merged and ranked together). Found by
        // a new user: a check of the indexers' loads, then the load, let both through (exit 0
        // with the merged graph).
        const other = await rankCase(graphs.hollins, PARTITIONS);
        const refusal = /the cluster's web index ranks another graph \(digest [0-9a-f]{16}; this graph's is [0-9a-f]{16}(, given as job [0-9a-f]{16})?\): loading this one would merge the two graphs/;
        const both = await Promise.allSettled([c.rank(expected), c.rank(other)]);
        assert.equal(both.filter((r) => r.status === 'fulfilled').length, 1, `exactly one of two graphs ranked at once: ${both.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ranked')).join(' | ')}`);
        const won = both[0]!.status === 'fulfilled' ? 0 : 1;
        const [winner, loser] = won === 0 ? [expected, other] : [other, expected];
        assertClusterRank((both[won] as PromiseFulfilledResult<Awaited<ReturnType<typeof c.rank>>>).value, winner);
        assert.match(String((both[1 - won] as PromiseRejectedResult).reason), refusal);
        const job = (both[won] as PromiseFulfilledResult<Awaited<ReturnType<typeof c.rank>>>).value.job;
        // The other graph under the first one's job name (found by a new user: exit 0 with the
        // first graph's scores, "load found applied").
        await assert.rejects(c.rank(loser, { job }), refusal);
        await assert.rejects(c.rank(loser), refusal);
        // The same graph under another job name: told to run it as its job (found by a new user:
        // it was refused as "another graph").
        await assert.rejects(c.rank(winner, { job: 'renamed' }), new RegExp(`holds a load under another job name \\(loader/${job}; this run is job renamed\\)\\. If it is this graph .*run it as that job \\(--job ${job};`));
        // The first graph again is the same job: it resumes, and the result is unchanged.
        assertClusterRank(await c.rank(winner), winner);
      }
      await c.stopAll();
    });
  });
}

test('a worker SIGKILLed during the metric rounds: its partitions are owned again within the lease, the result is exact', { timeout: 300_000 }, async (t) => {
  if (await skipWithoutRedis(t)) return;
  await withWebIndexCluster(t, { partitions: PARTITIONS, leaseMs: LEASE_MS }, async (c) => {
    const ws = [await c.startWorker('w1'), await c.startWorker('w2'), await c.startWorker('w3')];
    await c.allRunningOn(ws);
    const expected = await rankCase(graphs.epa, PARTITIONS);
    let killedAt: number | undefined;
    let ownedAgain: Promise<number> | undefined;
    const result = await c.rank(expected, {
      onRound: (r) => {
        if (r.round !== 3 || killedAt !== undefined) return;
        killedAt = Date.now();
        ws[0]!.child.kill('SIGKILL');
        ownedAgain = c.allRunningOn(ws.slice(1), 30_000).then(() => Date.now() - killedAt!);
      },
    });
    assert.ok(killedAt !== undefined, 'the kill happened during the rounds');
    assertClusterRank(result, expected);
    const ms = await ownedAgain!;
    assert.ok(ms <= LEASE_MS + 3 * (LEASE_MS / 4) + 2000, `owned again ${ms} ms after the SIGKILL (lease ${LEASE_MS} ms)`);
    t.diagnostic(`partitions owned again ${ms} ms after the SIGKILL`);
  });
});

test('a worker SIGKILLed during the load: the result is exact', { timeout: 300_000 }, async (t) => {
  if (await skipWithoutRedis(t)) return;
  await withWebIndexCluster(t, { partitions: PARTITIONS, leaseMs: LEASE_MS }, async (c) => {
    const ws = [await c.startWorker('w1'), await c.startWorker('w2'), await c.startWorker('w3')];
    await c.allRunningOn(ws);
    const expected = await rankCase(graphs.epa, PARTITIONS);
    const job = c.rank(expected);
    job.catch(() => undefined); // awaited below; a failure before that must not hide as an unhandled rejection
    // The load is under way once an indexer applied a message of the loader: kill a worker then.
    const client = await c.client();
    await until('the load to start', async () => {
      const reports = (await Promise.all(Array.from({ length: PARTITIONS }, (_, p) => client.ask('index', p, { kind: 'flow' })))) as StreamFlowReport[];
      return reports.some((r) => r.consumers.some((c) => Object.keys(c.applied).some((producer) => producer.startsWith('loader/'))));
    }, 30_000);
    ws[1]!.child.kill('SIGKILL');
    assertClusterRank(await job, expected);
  });
});

test('a fourth worker joins during the job; a worker stopped past its lease and resumed changes nothing that counts', { timeout: 300_000 }, async (t) => {
  if (await skipWithoutRedis(t)) return;
  await withWebIndexCluster(t, { partitions: PARTITIONS, leaseMs: LEASE_MS }, async (c) => {
    const ws = [await c.startWorker('w1'), await c.startWorker('w2'), await c.startWorker('w3')];
    await c.allRunningOn(ws);
    const expected = await rankCase(graphs.epa, PARTITIONS);
    let joined: Promise<unknown> | undefined;
    let stopped = false;
    const result = await c.rank(expected, {
      onRound: (r) => {
        if (r.round === 2 && !joined) joined = c.startWorker('w4');
        if (r.round === 4 && !stopped) {
          stopped = true;
          ws[2]!.child.kill('SIGSTOP');
          setTimeout(() => ws[2]!.child.kill('SIGCONT'), 2 * LEASE_MS);
        }
      },
    });
    await joined;
    assertClusterRank(result, expected);
    const w4 = c.workers.find((w) => w.name === 'w4')!;
    assert.ok(w4.events.some((e) => e.event.type === 'started'), 'the fourth worker took partitions');
    assert.ok(ws[2]!.events.some((e) => e.event.type === 'fenced'), 'the stopped worker found its leases gone and stopped its partitions (fenced)');
  });
});

test('the rank client SIGKILLed mid-rounds and started again with the same command resumes the job: exact', { timeout: 300_000 }, async (t) => {
  if (await skipWithoutRedis(t)) return;
  await withWebIndexCluster(t, { partitions: PARTITIONS, leaseMs: LEASE_MS }, async (c) => {
    const ws = [await c.startWorker('w1'), await c.startWorker('w2'), await c.startWorker('w3')];
    await c.allRunningOn(ws);
    const expected = await rankCase(graphs.epa, PARTITIONS);
    const out = join(c.dataDir, 'scores.tsv');
    const args = [
      resolve(repoRoot, 'bin/shardflow.mjs'), 'rank', '--cluster', REDIS_URL, '--cluster-name', c.clusterName, '--broker', c.brokerSpec,
      '--key-prefix', c.keyPrefix, '--pages', join(graphs.epa, 'pages.txt'), '--links', join(graphs.epa, 'links.tsv'), '--out', out, '--log-level', 'info',
    ];
    // First client: killed once it logged round 3.
    const first = spawn(process.execPath, args, { cwd: repoRoot, stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    const exited = new Promise<NodeJS.Signals | null>((r) => first.on('exit', (_code, signal) => r(signal)));
    await new Promise<void>((done, fail) => {
      first.stderr!.on('data', (d: Buffer) => {
        log += d.toString('utf8');
        if (/"round":3\b/.test(log)) {
          first.kill('SIGKILL');
          done();
        }
      });
      void exited.then(() => fail(new Error(`the first client exited before round 3: ${log.slice(-2000)}`)));
    });
    assert.equal(await exited, 'SIGKILL');
    assert.ok(!existsSync(out), 'the killed client wrote no scores');
    // The same command again: resumes (load found applied, rounds numbered on) and finishes.
    const again = spawnSync(process.execPath, args, { cwd: repoRoot, encoding: 'utf8', timeout: 240_000 });
    assert.equal(again.status, 0, again.stderr.slice(-3000));
    assert.match(again.stderr, /load found applied/);
    assertClusterRank({ converge: { converged: true }, scores: [...(await readScores(out))], ...countsOf(again.stderr) }, expected);
  });
});

/** The counts `shardflow rank` prints: `ranked P pages, L links, B backlinks`. */
function countsOf(stderr: string): { pages: number; outlinks: number; backlinks: number } {
  const m = /ranked (\d+) pages, (\d+) links, (\d+) backlinks/.exec(stderr);
  assert.ok(m, `the summary line in: ${stderr.slice(-1000)}`);
  return { pages: Number(m[1]), outlinks: Number(m[2]), backlinks: Number(m[3]) };
}

test('serve --cluster answers the query API from each key\'s owner, also after that owner is SIGKILLed', { timeout: 240_000 }, async (t) => {
  if (await skipWithoutRedis(t)) return;
  await withWebIndexCluster(t, { partitions: PARTITIONS, leaseMs: LEASE_MS }, async (c) => {
    const ws = [await c.startWorker('w1'), await c.startWorker('w2'), await c.startWorker('w3')];
    await c.allRunningOn(ws);
    const expected = await rankCase(graphs.polblogs, PARTITIONS);
    const result = await c.rank(expected);
    const serve = spawn(process.execPath, [
      resolve(repoRoot, 'bin/shardflow.mjs'), 'serve', '--cluster', REDIS_URL, '--cluster-name', c.clusterName, '--key-prefix', c.keyPrefix, '--broker', c.brokerSpec, '--port', '0',
    ], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    serve.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    try {
      const api = await new Promise<string>((done, fail) => {
        let out = '';
        serve.stdout!.on('data', (d: Buffer) => {
          out += d.toString();
          const m = /query API on (\S+)/.exec(out);
          if (m) done(m[1]!);
        });
        serve.on('exit', (code) => fail(new Error(`serve exited ${code}: ${err}`)));
      });
      const get = async (path: string) => {
        const res = await fetch(new URL(path, api));
        return { status: res.status, body: (await res.json()) as Record<string, any> };
      };
      const [topUrl, topScore] = result.scores[0]!;
      const check = async () => {
        const page = await get(`/v1/page?url=${encodeURIComponent(topUrl)}`);
        assert.equal(page.status, 200, JSON.stringify(page.body));
        assert.ok(Math.abs(page.body.score - topScore) < 1e-9, `score ${page.body.score} vs ${topScore}`);
        const top = await get('/v1/top/pages?limit=5');
        assert.equal(top.status, 200);
        assert.deepEqual(top.body.top.map((p: { url: string }) => p.url), result.scores.slice(0, 5).map(([u]) => u));
        assert.equal(top.body.pages, result.pages);
        const back = await get(`/v1/backlinks?url=${encodeURIComponent(topUrl)}&limit=3`);
        assert.equal(back.status, 200);
        assert.ok(back.body.total > 0);
      };
      await check();
      // Kill the owner of the top page's partition: the same reads are answered by its next owner.
      const partition = Number((await get(`/v1/page?url=${encodeURIComponent(topUrl)}`)).body.partition);
      const owner = (await c.status()).partitions.find((p) => p.partition === partition)!.owner;
      ws.find((w) => w.id === owner)!.child.kill('SIGKILL');
      await check();
    } finally {
      serve.kill('SIGTERM');
    }
  });
});

test('a web-index worker with other weights or another partition count is refused by the cluster (exit 2, the reason)', { timeout: 120_000 }, async (t) => {
  if (await skipWithoutRedis(t)) return;
  await withWebIndexCluster(t, { partitions: PARTITIONS, leaseMs: LEASE_MS }, async (c) => {
    await c.startWorker('w1');
    for (const [flag, value, shown] of [['--weights', 'reasonable', /weights=reasonable/], ['--partitions', '5', /"partitions":5/]] as const) {
      const args = c.workerArgs('w2');
      const i = args.indexOf(flag);
      if (i >= 0) args[i + 1] = value;
      else args.push(flag, value);
      const r = spawnSync(process.execPath, args, { cwd: repoRoot, encoding: 'utf8', timeout: 60_000 });
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, shown);
      assert.match(r.stderr, /start it with the cluster's topology/);
    }
  });
});

test('a worker whose data dir lacks the store of a partition an earlier owner started refuses it, with the reason (without --checkpoints state does not move between machines)', { timeout: 120_000 }, async (t) => {
  if (await skipWithoutRedis(t)) return;
  await withWebIndexCluster(t, { partitions: PARTITIONS, leaseMs: LEASE_MS }, async (c) => {
    const w1 = await c.startWorker('w1');
    await c.allRunningOn([w1]);
    // A query server warm (its first walk of every partition done) before the partitions are
    // refused must keep answering: found by a new user, its next walk's failure was an
    // unhandled rejection that ended the process.
    const warm = await openClusterQueryServer({ cluster: REDIS_URL, clusterName: c.clusterName, keyPrefix: c.keyPrefix, broker: c.brokerSpec, host: '127.0.0.1', port: 0 }, undefined);
    const page = async (server: { url: string }) => {
      const res = await fetch(new URL('/v1/page?url=http%3A%2F%2Fa.test%2F', server.url));
      return { status: res.status, body: JSON.stringify(await res.json()) };
    };
    assert.equal((await page(warm)).status, 404, 'no such page, the walk done');
    await c.stopAll(); // w1 hands every partition back
    // w2 on another data dir (another machine): every partition was started before, its store is elsewhere.
    const other = tempDir('sf-wic-other-');
    try {
      const args = c.workerArgs('w2');
      args[args.indexOf('--data-dir') + 1] = other.dir;
      const w2 = spawnWorkerProcess('w2', args);
      c.workers.push(w2);
      const s = await until('w2 to refuse the partitions', async () => {
        const st = await c.status();
        return st.partitions.length === PARTITIONS && st.partitions.every((p) => p.state === 'failed') && st;
      }, 60_000);
      for (const p of s.partitions) assert.match(p.reason ?? '', /started by an earlier owner .* is not in this worker's data dir/);
      for (let i = 0; i < 3; i++) {
        const r = await page(warm); // its partition's read: 503 with the refusal; the walk in the background fails too
        assert.equal(r.status, 503, r.body);
        await new Promise((done) => setTimeout(done, 2500)); // past the 2 s summary TTL: the next read walks again
      }
      await warm.close();
      // A query server started now answers a read of a refused partition 503 at once, with the
      // refusal (found by a new user: every read waited 60 s, since scores need every
      // partition's summary, and said "no worker runs it (unowned, or refused...)").
      const server = await openClusterQueryServer({ cluster: REDIS_URL, clusterName: c.clusterName, keyPrefix: c.keyPrefix, broker: c.brokerSpec, host: '127.0.0.1', port: 0 }, undefined);
      try {
        const t0 = Date.now();
        const res = await fetch(new URL('/v1/page?url=http%3A%2F%2Fa.test%2F', server.url));
        const body = (await res.json()) as { error?: { message?: string } };
        assert.equal(res.status, 503, JSON.stringify(body));
        assert.match(JSON.stringify(body), /partition \d of the web index is refused by its workers, so it answers no \w+ read until an operator acts: .*started by an earlier owner/);
        assert.ok(Date.now() - t0 < 15_000, `answered in ${Date.now() - t0} ms, not after the 60 s read timeout`);
      } finally {
        await server.close();
      }
    } finally {
      other.cleanup();
    }
  });
});
