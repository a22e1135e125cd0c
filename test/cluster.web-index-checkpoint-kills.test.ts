// Issue 16, "Done when": the web index on worker processes with their own data dirs and S3
// checkpoints (S3Proxy), SIGKILLed where a checkpoint is most fragile.
//
// 1. Seeded kills at five points of one epa rank over Redis Streams (during the load, an early
//    round, just after a checkpoint put, during a checkpoint upload, a late round), each of the
//    worker owning the most partitions (ties broken by the seed) and followed by a new worker
//    with an empty data dir (a new machine), so three stay alive. The seed is in the test's
//    name; SHARDFLOW_KILL_SEED=<seed> replays it.
// 2. A kill during a checkpoint upload, over Redis Streams and over Pulsar: the put's files are
//    stored but its manifest is not (the `SHARDFLOW_CHECKPOINT_HOLD_MANIFEST` test hook holds
//    it; docs/checkpoints.md), so the half-uploaded checkpoint is invisible and the next owner
//    restores the one before.
// Each ends with L1 <= 1e-6 to the reference scores and the one-process counts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CHECKPOINT_HOLD_MANIFEST_ENV, openCheckpointStore } from '../src/storage/index.js';
import { decodeManifest, filesPrefix, manifestsPrefix, sequenceOfManifest } from '../src/checkpoint/manifest.js';
import { S3Objects, s3ConnectionFromEnv } from '../src/checkpoint/s3Objects.js';
import { seededRandom } from '../src/runtime/supervision/seededRandom.js';
import { WEB_INDEX_STAGE } from '../src/topology/clusterProtocol.js';
import type { WorkerEvent } from '../src/index.js';
import { skipWithoutPulsar } from './kit/brokers.js';
import { graphs } from './kit/datasets.js';
import { holdLoadAfter } from './kit/heldLoad.js';
import { S3_BUCKET, s3Env } from './kit/s3.js';
import type { WorkerProcess } from './kit/clusterRun.js';
import { assertClusterRank, rankCase, restoresOf, withCheckpointedWebIndexCluster, type WebIndexCluster } from './kit/webIndexCluster.js';

const PARTITIONS = 3;
const LEASE_MS = 3000;
/** How long the hooked put holds its manifest: far longer than the test takes to see the line and kill. */
const HOLD_MS = 120_000;

/** Resolves once `probe` is true, polling every 5 ms (a kill point must be met within milliseconds); rejects after `timeoutMs` naming `what`. */
async function when(what: string, probe: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const alive = (w: WorkerProcess): boolean => w.child.exitCode === null && w.child.signalCode === null;

/** The held put a worker's stderr announces (the hook's line), or undefined. */
function heldPut(w: WorkerProcess): { key: string; sequence: number; files: number } | undefined {
  const m = /shardflow test hook: checkpoint \S+ (\S+)@(\d+): (\d+) files stored, manifest held/.exec(w.stderr);
  return m ? { key: m[1]!, sequence: Number(m[2]), files: Number(m[3]) } : undefined;
}

/** Of the live workers, the one owning the most running partitions (ties: `random` picks). */
async function mostPartitions(c: WebIndexCluster, random: () => number): Promise<WorkerProcess> {
  const s = await c.status();
  const live = c.workers.filter(alive);
  const owned = live.map((w) => s.partitions.filter((p) => p.stage === WEB_INDEX_STAGE && p.owner === w.id).length);
  const most = Math.max(...owned);
  const tied = live.filter((_, i) => owned[i] === most);
  return tied[Math.floor(random() * tied.length)]!;
}

/**
 * What the S3 server holds under a checkpoint key right after a kill: the sequences of its
 * manifests, and the file objects no manifest lists (a put's files without its manifest).
 */
async function checkpointObjects(prefix: string, key: string): Promise<{ sequences: number[]; orphans: string[] }> {
  const objects = new S3Objects(S3_BUCKET, prefix, s3ConnectionFromEnv(s3Env()));
  try {
    const sequences = (await objects.list(manifestsPrefix(key))).map((o) => sequenceOfManifest(key, o.name)).filter((n): n is number => n !== undefined).sort((a, b) => a - b);
    const listed = new Set<string>();
    for (const seq of sequences) {
      const m = decodeManifest(key, seq, (await objects.getBytes(`${manifestsPrefix(key)}${String(seq).padStart(16, '0')}.json`))!);
      for (const f of m.files) listed.add(`${filesPrefix(key)}${f.sha256}`);
    }
    const orphans = (await objects.list(filesPrefix(key))).map((o) => o.name).filter((n) => !listed.has(n));
    return { sequences, orphans };
  } finally {
    await objects.close();
  }
}

/**
 * After the worker holding a put's manifest was SIGKILLed: the put's files are in the S3
 * server, its manifest is not, and `latest` shows the checkpoint before it.
 * @returns the sequence of that earlier checkpoint
 */
async function assertHalfUploadInvisible(checkpointsUrl: string, prefix: string, held: { key: string; sequence: number; files: number }): Promise<number> {
  const { sequences, orphans } = await checkpointObjects(prefix, held.key);
  assert.ok(orphans.length >= held.files, `the held put's ${held.files} files are stored without a manifest (${orphans.length} unlisted file objects under ${held.key})`);
  assert.ok(!sequences.includes(held.sequence), `no manifest of the held put ${held.key}@${held.sequence}`);
  const store = openCheckpointStore(checkpointsUrl);
  try {
    const latest = await store.latest(held.key);
    assert.ok(latest !== undefined && latest.sequence < held.sequence, `the latest visible checkpoint of ${held.key} (${latest?.sequence}) is the one before the held put (${held.sequence})`);
    return latest.sequence;
  } finally {
    await store.close();
  }
}

/** The `restored` events of `unit` after `since` (wall ms), on any worker, in the order they happened (not by worker: a later move may land on an earlier worker). */
function restoredAfter(ws: readonly WorkerProcess[], unit: string, since: number): Array<{ worker: string; at: number; event: Extract<WorkerEvent, { type: 'restored' }> }> {
  return ws
    .flatMap((w) => w.events.flatMap(({ event: e, at }) => (e.type === 'restored' && e.unit === unit && at >= since ? [{ worker: w.name, at, event: e }] : [])))
    .sort((a, b) => a.at - b.at);
}

const SEED = process.env.SHARDFLOW_KILL_SEED ? Number(process.env.SHARDFLOW_KILL_SEED) : 1 + Math.floor(Math.random() * 1_000_000);

/** The five kill points of a seed: when each fires (after `loadSends` of the load's messages, the rest held until the kill; rounds) and the hook's count. */
function killPlan(seed: number) {
  const random = seededRandom(seed);
  // epa on 3 partitions is 76 load messages (64 pages each): the load is held after 1 to 60.
  const loadSends = 1 + Math.floor(random() * 60);
  const early = 2 + Math.floor(random() * 5);
  const afterPut = early + 3 + Math.floor(random() * 6);
  const holdAfterPuts = 2 + Math.floor(random() * 4);
  const late = 30 + Math.floor(random() * 16);
  return { random, loadSends, early, afterPut, holdAfterPuts, late };
}

test(`three workers with their own data dirs and S3 checkpoints rank epa through seeded SIGKILLs at five points, each followed by a new worker (seed ${SEED}; replay with SHARDFLOW_KILL_SEED=${SEED}): the result is exact`, { timeout: 1_200_000 }, async (t) => {
  const plan = killPlan(SEED);
  t.diagnostic(`seed ${SEED}: load after ${plan.loadSends} messages, round ${plan.early}, a put after round ${plan.afterPut}, the ${plan.holdAfterPuts}th storing put of the next worker, round >= ${plan.late}`);
  await withCheckpointedWebIndexCluster(t, { partitions: PARTITIONS, leaseMs: LEASE_MS }, async ({ c, ws, checkpointsUrl, prefix }) => {
    const expected = await rankCase(graphs.epa, PARTITIONS);
    // Every partition has a checkpoint before the job starts (a partition started and killed before its first one is refused by its next owner: docs/cluster.md).
    await when('a checkpoint of every partition', () => new Set(ws.flatMap((w) => w.events.flatMap(({ event: e }) => (e.type === 'checkpointed' ? [e.unit] : [])))).size === PARTITIONS, 60_000);
    let round = 0;
    let loadedAt: number | undefined;
    const kills: string[] = [];
    let replacements = 0;
    let held: { key: string; sequence: number; files: number; visible: number; at: number } | undefined;
    /** SIGKILLs `w`, waits for its exit, runs `check`, starts a worker with a new, empty data dir (with `env`). */
    const kill = async (w: WorkerProcess, point: string, env: NodeJS.ProcessEnv = {}, check?: () => Promise<void>) => {
      w.child.kill('SIGKILL');
      kills.push(`${point}: ${w.name} at round ${round}`);
      await w.exited;
      await check?.();
      await c.startWorker(`w${4 + replacements++}`, env);
    };
    const started = Date.now();
    const load = holdLoadAfter(await c.broker(), plan.loadSends);
    const killer = (async () => {
      // 1. During the load: its first loadSends messages are sent, the rest wait for the kill.
      await load.held;
      const loadVictim = await mostPartitions(c, plan.random);
      assert.equal(loadedAt, undefined, `the load was still running after ${plan.loadSends} messages`);
      await kill(loadVictim, 'during the load').finally(() => load.release());
      // 2. An early round.
      await when(`round ${plan.early}`, () => round >= plan.early, 600_000);
      await kill(await mostPartitions(c, plan.random), `round ${plan.early}`);
      // 3. Just after a checkpoint put of the worker owning the most partitions.
      await when(`round ${plan.afterPut}`, () => round >= plan.afterPut, 600_000);
      const putVictim = await mostPartitions(c, plan.random);
      const seen = putVictim.events.length;
      await when(`a checkpoint put of ${putVictim.name}`, () => putVictim.events.slice(seen).some((e) => e.event.type === 'checkpointed'), 120_000);
      // The next worker holds the manifest of its holdAfterPuts-th put that stores files.
      await kill(putVictim, `just after a checkpoint put (round >= ${plan.afterPut})`, { [CHECKPOINT_HOLD_MANIFEST_ENV]: `${plan.holdAfterPuts}:${HOLD_MS}` });
      // 4. During a checkpoint upload: that worker's files are stored, its manifest is not.
      const hooked = c.workers.at(-1)!;
      await when(`${hooked.name}'s held put (its stderr: ${hooked.stderr.slice(-300)})`, () => heldPut(hooked) !== undefined, 600_000);
      const h = heldPut(hooked)!;
      // Read at once, before the next owner's puts and collects change the key.
      await kill(hooked, `during the upload of ${h.key}@${h.sequence}`, {}, async () => {
        held = { ...h, visible: await assertHalfUploadInvisible(checkpointsUrl, prefix, h), at: Date.now() };
      });
      // 5. A late round.
      const late = Math.max(plan.late, round + 3);
      await when(`round ${late}`, () => round >= late, 600_000);
      await kill(await mostPartitions(c, plan.random), `round ${late}`);
    })();
    const result = await Promise.all([
      c.rank(expected, { broker: load.broker, hangMs: 1_080_000, tolerance: 1e-7, onLoaded: () => (loadedAt = Date.now()), onRound: (r) => void (round = r.round) }),
      killer,
    ]).then(([r]) => r);
    t.diagnostic(`kills: ${kills.join('; ')}`);
    assert.equal(kills.length, 5, 'five kills');
    assertClusterRank(result, expected);
    // The unit of the held put came back from the checkpoint before it (or one its next owner put later, never the held one).
    const unit = `${WEB_INDEX_STAGE}/${held!.key.split('/').at(-1)!.slice(1)}`;
    const back = restoredAfter(c.workers, unit, held!.at);
    assert.ok(back.length >= 1 && back[0]!.event.sequence === held!.visible, `${unit} restored from ${held!.visible} after the kill mid-upload: ${back.map((b) => `${b.worker}@${b.event.sequence}`).join(', ')}`);
    assert.ok(back.every((b) => b.event.sequence !== held!.sequence), 'never from the half-uploaded checkpoint');
    t.diagnostic(`${result.converge.rounds} rounds, ${((Date.now() - started) / 1000).toFixed(1)} s; restores: ${restoresOf(c.workers).join('; ')}`);
    // The rounds' puts were mostly WAL tail puts (only the log's new bytes), and restores replayed their chunks.
    const puts = c.workers.flatMap((w) => w.events.flatMap(({ event: e }) => (e.type === 'checkpointed' ? [e] : [])));
    const tails = puts.filter((p) => p.walTail).length;
    const tailRestores = c.workers.flatMap((w) => w.events.filter(({ event: e }) => e.type === 'restored' && e.walChunks > 0)).length;
    // (With 3 partitions on 3 workers, a worker rarely holds two: group objects are few or none here.)
    const grouped = puts.filter((p) => p.groupedManifests > 1).length;
    t.diagnostic(`${puts.length} puts, ${tails} WAL tail puts, ${grouped} of them in group objects; ${tailRestores} restores of a checkpoint with WAL tails`);
    assert.ok(tails > 0, 'WAL tail puts were made');
    assert.ok(tailRestores > 0, 'a restore replayed WAL tails');
    await c.stopAll();
  });
});

for (const broker of ['redis', 'pulsar'] as const) {
  test(`a worker SIGKILLed during a checkpoint upload over ${broker === 'redis' ? 'Redis Streams' : 'Pulsar'} (its manifest held by the test hook): the half-uploaded checkpoint is invisible, the next owner restores the one before, the epa rank is exact`, { timeout: 900_000 }, async (t) => {
    let spec: string | undefined;
    if (broker === 'pulsar') {
      spec = await skipWithoutPulsar(t);
      if (!spec) return;
    }
    // w1 holds the manifest of its 12th put that stores files: past the set-up's (a first
    // checkpoint per partition it starts, at most 3; a hand-back checkpoint per partition it
    // hands to w2 and w3, at most 3), so during the load or the rounds, and its partition has
    // checkpoints before it.
    const env = [{ [CHECKPOINT_HOLD_MANIFEST_ENV]: `12:${HOLD_MS}` }];
    await withCheckpointedWebIndexCluster(t, { partitions: PARTITIONS, leaseMs: LEASE_MS, env, ...(spec ? { broker: spec } : {}) }, async ({ c, ws, checkpointsUrl, prefix }) => {
      const expected = await rankCase(graphs.epa, PARTITIONS);
      const w1 = ws[0]!;
      let round = 0;
      const killer = (async () => {
        await when(`w1's held put (its stderr: ${w1.stderr.slice(-300)})`, () => heldPut(w1) !== undefined, 600_000);
        w1.child.kill('SIGKILL');
        const h = heldPut(w1)!;
        const killedAt = Date.now();
        const killedRound = round;
        await w1.exited;
        const visible = await assertHalfUploadInvisible(checkpointsUrl, prefix, h);
        return { h, killedAt, killedRound, visible };
      })();
      const [result, k] = await Promise.all([c.rank(expected, { hangMs: 780_000, tolerance: 1e-7, onRound: (r) => void (round = r.round) }), killer]);
      assertClusterRank(result, expected);
      const unit = `${WEB_INDEX_STAGE}/${k.h.key.split('/').at(-1)!.slice(1)}`;
      const back = restoredAfter(ws.slice(1), unit, k.killedAt);
      assert.ok(back.length >= 1 && back[0]!.event.sequence === k.visible, `${unit} restored from ${k.visible}, the checkpoint before the held put ${k.h.sequence}: ${back.map((b) => `${b.worker}@${b.event.sequence}`).join(', ')}`);
      t.diagnostic(`w1 killed during the upload of ${k.h.key}@${k.h.sequence} (${k.h.files} files stored) at round ${k.killedRound}; restored ${back.map((b) => `${b.worker}@${b.event.sequence}`).join(', ')}; ${result.converge.rounds} rounds`);
      await c.stopAll();
    });
  });
}
