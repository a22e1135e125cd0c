import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ClusterRun, until, withClusterRun, type WorkerProcess } from './kit/clusterRun.js';
import { skipWithoutRedis } from './kit/cluster.js';
import { skipWithoutPulsar } from './kit/brokers.js';

/**
 * Partitions that move through checkpoints (docs/checkpoints.md, "Partitions that move"):
 * three worker processes (test/kit/clusterWorker.ts) run the two-stage click counter's 8
 * units over Redis Streams, each worker with its OWN data dir; the only state they share is a
 * directory checkpoint store (checkpoints every 400 ms, and at each hand-back). A unit that
 * moves is restored from its latest checkpoint by its next owner. `verify()` restores every
 * partition's latest checkpoint after the workers exited: the counts of both stages equal the
 * ground truth exactly. The last test runs `shardflow worker --checkpoints … --broker pulsar://…`
 * processes (skipped without Pulsar, failed under SHARDFLOW_REQUIRE_BROKERS=1).
 */
const LEASE_MS = 3000;
const CHECKPOINT_MS = 400;

async function cluster(t: import('node:test').TestContext, body: (run: ClusterRun) => Promise<void>): Promise<void> {
  if (await skipWithoutRedis(t)) return;
  await withClusterRun(t, LEASE_MS, { checkpoints: { intervalMs: CHECKPOINT_MS } }, body);
}

type Restored = { unit: string; epoch: number; sequence: number; seconds: number; reason: string };
/** The `restored` events of `workers` since wall time `since`. */
const restoredOn = (workers: readonly WorkerProcess[], since: number): Restored[] =>
  workers.flatMap((w) => w.events.filter((e) => e.event.type === 'restored' && e.at >= since).map((e) => e.event as unknown as Restored));
const eventTimes = (w: WorkerProcess, type: string, unit: string): number[] =>
  w.events.filter((e) => e.event.type === type && (e.event as { unit?: string }).unit === unit).map((e) => e.at);

test('SIGTERM hand-back between workers with separate data dirs: the next owners restore the hand-back checkpoints; counts exact', async (t) => {
  await cluster(t, async (run) => {
    const workers = [await run.startWorker('w1'), await run.startWorker('w2'), await run.startWorker('w3')];
    await run.balancedOn(workers);
    await run.send(1500);
    await run.quiet(workers);

    const [leaving, ...staying] = workers as [WorkerProcess, ...WorkerProcess[]];
    const seen = leaving.events.length;
    const stoppedAt = Date.now();
    leaving.child.kill('SIGTERM');
    assert.equal((await leaving.exited).code, 0);
    const released = leaving.events.slice(seen).filter((e) => e.event.type === 'released').map((e) => (e.event as { unit: string }).unit).sort();
    assert.ok(released.length > 0, 'the leaving worker held partitions');
    await run.send(500);
    await run.quiet(staying);
    const restored = restoredOn(staying, stoppedAt);
    let moves = 0;
    for (const u of released) {
      const releasedAt = eventTimes(leaving, 'released', u).at(-1)!;
      const owner = staying.find((w) => eventTimes(w, 'started', u).some((at) => at >= releasedAt))!;
      const startedAt = eventTimes(owner, 'started', u).find((at) => at >= releasedAt)!;
      const r = restored.find((x) => x.unit === u);
      if (r) {
        moves++;
        t.diagnostic(`planned move of ${u}: released -> running on ${owner.name} in ${startedAt - releasedAt} ms (restore of checkpoint ${r.sequence}: ${r.seconds.toFixed(3)} s)`);
      } else {
        // Kept its own store: it ran the unit before, and no owner since checkpointed anything newer.
        assert.ok(eventTimes(owner, 'started', u).some((at) => at < releasedAt), `${u}: its next owner ${owner.name} restored it, or had run it before`);
        t.diagnostic(`planned move of ${u}: released -> running on ${owner.name} in ${startedAt - releasedAt} ms (its own store was as new as the latest checkpoint)`);
      }
    }
    assert.ok(moves > 0, 'some partition moved through a checkpoint');
    await run.stopAll();
    await run.verify();
  });
});

test('SIGKILL of a worker mid-stream: the next owners restore its partitions\' last checkpoints and the broker replays the rest; counts exact', async (t) => {
  await cluster(t, async (run) => {
    const workers = [await run.startWorker('w1'), await run.startWorker('w2'), await run.startWorker('w3')];
    const s = await run.balancedOn(workers);
    const victim = workers.find((w) => w.id === s.leader?.worker)!;
    const lost = s.partitions.filter((p) => p.owner === victim.id).map((p) => p.unit);
    await run.send(1000);
    await new Promise((r) => setTimeout(r, 3 * CHECKPOINT_MS)); // some of its work checkpointed, more in flight
    const live = workers.filter((w) => w !== victim);
    const send = run.send(1000);
    await new Promise((r) => setTimeout(r, 150));
    const killedAt = Date.now();
    victim.child.kill('SIGKILL');
    await send;
    await run.allRunningOn(live);
    t.diagnostic(`crash: ${lost.length} partitions of the killed worker running again ${Date.now() - killedAt} ms after SIGKILL`);
    const restored = restoredOn(live, killedAt).filter((r) => lost.includes(r.unit));
    assert.ok(restored.length > 0, `the next owners restored the killed worker's checkpoints (lost ${lost.join(', ')}; restored ${JSON.stringify(restored)})`);
    for (const r of restored) t.diagnostic(`crash move of ${r.unit}: restored checkpoint ${r.sequence} in ${r.seconds.toFixed(3)} s (${r.reason})`);
    await run.send(500);
    await run.quiet(live);
    await run.stopAll();
    await run.verify();
  });
});

test('warm standbys: a SIGKILLed worker\'s partitions go to their standbys, whose restores take the checkpoints\' files from their caches; counts exact', async (t) => {
  if (await skipWithoutRedis(t)) return;
  await withClusterRun(t, LEASE_MS, { checkpoints: { intervalMs: CHECKPOINT_MS, standbys: 1 } }, async (run) => {
    const workers = [await run.startWorker('w1'), await run.startWorker('w2'), await run.startWorker('w3')];
    await run.balancedOn(workers);
    await run.send(1500);
    await run.quiet(workers);
    // Every unit has a live standby that warmed its newest checkpoint.
    const status = await until('every partition has a standby', async () => {
      const s = await run.status();
      return s.partitions.every((p) => p.standbys.length === 1 && p.standbys[0] !== p.owner) && s;
    }, 15_000);
    const victim = workers.find((w) => w.id !== status.leader?.worker)!;
    const lost = status.partitions.filter((p) => p.owner === victim.id);
    const warmedOn = (w: WorkerProcess, unit: string) => w.events.some((e) => e.event.type === 'warmed' && (e.event as { unit: string }).unit === unit);
    await until('the standbys warmed the victim\'s partitions', async () => lost.every((p) => warmedOn(workers.find((w) => w.id === p.standbys[0])!, p.unit)), 15_000);

    const live = workers.filter((w) => w !== victim);
    await run.send(500);
    await new Promise((r) => setTimeout(r, 2 * CHECKPOINT_MS));
    const killedAt = Date.now();
    victim.child.kill('SIGKILL');
    await run.send(500);
    await run.allRunningOn(live);
    const restored = restoredOn(live, killedAt).filter((r) => lost.some((p) => p.unit === r.unit)) as Array<Restored & { cachedBytes: number; bytes: number }>;
    for (const r of restored) t.diagnostic(`crash move of ${r.unit}: restored checkpoint ${r.sequence} in ${r.seconds.toFixed(3)} s, ${r.cachedBytes} of ${r.bytes} bytes from the standby cache`);
    let onStandby = 0;
    for (const p of lost) {
      const owner = live.find((w) => eventTimes(w, 'started', p.unit).some((at) => at >= killedAt))!;
      if (owner.id === p.standbys[0]) onStandby++;
    }
    assert.ok(onStandby > 0, `some of the victim's partitions went to their standbys (${onStandby} of ${lost.length})`);
    assert.ok(restored.some((r) => r.cachedBytes > 0), `a restore took files from its standby cache (${JSON.stringify(restored)})`);
    await run.send(300);
    await run.quiet(live);
    await run.stopAll();
    await run.verify();
  });
});

test('over Pulsar, shardflow worker --checkpoints: SIGKILL of a worker mid-stream, its partitions restored elsewhere, counts exact', { timeout: 180_000 }, async (t) => {
  if (await skipWithoutRedis(t)) return;
  const pulsar = await skipWithoutPulsar(t);
  if (!pulsar) return;
  await withClusterRun(t, LEASE_MS, { cli: true, broker: pulsar, checkpoints: { intervalMs: CHECKPOINT_MS } }, async (run) => {
    const workers = [await run.startWorker('w1'), await run.startWorker('w2'), await run.startWorker('w3')];
    const s = await run.balancedOn(workers);
    const victim = workers.find((w) => w.id !== s.leader?.worker)!;
    const lost = s.partitions.filter((p) => p.owner === victim.id).map((p) => p.unit);
    await run.send(600);
    await new Promise((r) => setTimeout(r, 3 * CHECKPOINT_MS));
    const killedAt = Date.now();
    victim.child.kill('SIGKILL');
    await run.send(600);
    const live = workers.filter((w) => w !== victim);
    await run.allRunningOn(live, 60_000);
    t.diagnostic(`crash over Pulsar: ${lost.length} partitions running again ${Date.now() - killedAt} ms after SIGKILL`);
    const restored = restoredOn(live, killedAt).filter((r) => lost.includes(r.unit));
    assert.ok(restored.length > 0, `the next owners restored the killed worker's checkpoints (lost ${lost.join(', ')})`);
    await run.send(300);
    await run.quiet(live);
    await run.stopAll();
    await run.verify();
  });
});
