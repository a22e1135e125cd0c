import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import {
  ChaosPolicy, DataDirError, epochSequence, producerId, type Broker, type Logger,
} from '../../src/index.js';
import { topic } from '../../src/runtime/topics.js';
import { tempDir } from './datasets.js';
import { twoStageClicks } from './twoStageClicks.js';

/**
 * The framework's exactly-once stage checks, run on any broker
 * (test/framework.stage-exactly-once*.test.ts).
 *
 * A two-stage topology under chaos: `count` (8 partitions) merges +1 per click into an int64
 * per host and, once per batch (`onBatch`), emits one delta per host of the batch through
 * its outbox to `totals` (2 partitions), which merges them. Both must equal the ground truth
 * whatever the injected faults and redeliveries; a producer started again on the same data
 * dir is counted; an undecodable message and one from a fenced-off producer incarnation are
 * dead-lettered with their reasons; a store of another partition count is refused.
 */
function clickTopology(partitions = 8) {
  return twoStageClicks('fw-test', partitions, { maxCount: 16, maxDelayMs: 2 });
}

const quiet: Logger = { debug() {}, warn() {}, error() {} };
const hosts = Array.from({ length: 30 }, (_, i) => `h${i}.example`);

async function counts(running: Awaited<ReturnType<ReturnType<typeof clickTopology>['topology']['start']>>, stage: 'count' | 'totals') {
  return new Map((await running.askAll(stage, 'hosts')).flat());
}

/** How much the scenario sends: clicks of the first and second producer runs. */
export interface StageScenarioSizes {
  readonly firstRun: number;
  readonly secondRun: number;
}

/**
 * Runs the scenario: two runs of the topology on one data dir, each with a broker from
 * `makeBroker` (closed after its run) and chaos at 5%; then the refused restart with another
 * partition count; then `cleanup` (also when an assertion failed).
 */
export async function stageExactlyOnceScenario(
  makeBroker: () => Promise<Broker>,
  cleanup: () => Promise<void>,
  sizes: StageScenarioSizes = { firstRun: 1500, secondRun: 700 },
): Promise<void> {
  const { dir, cleanup: rmDir } = tempDir('sf-framework-');
  const { clicks, topology } = clickTopology();
  const truth = new Map<string, number>();
  try {
    for (const [run, events] of [[1, sizes.firstRun], [2, sizes.secondRun]] as const) {
      const broker = await makeBroker();
      const running = await topology.start({ broker, dataDir: dir, logger: quiet, chaos: ChaosPolicy.create({ rate: 0.05, seed: run }) });
      // Stopped and closed when an assertion fails too: left open, they kept the test's process
      // (and the CI's test lane) running.
      try {
        let restarts = 0;
        running.system.events$.subscribe((e) => void (e.type === '@shardflow.restarted' && restarts++));
        const producer = await running.producer(clicks, 'clicks-src');
        assert.equal(producer.epoch, run, 'each start of the producer takes the next epoch');
        for (let i = 0; i < events; i++) {
          const host = hosts[(i * 7 + run) % hosts.length]!;
          await producer.send({ host, n: i });
          truth.set(host, (truth.get(host) ?? 0) + 1);
        }
        await running.quiescence({ timeoutMs: 240_000 });
        assert.deepEqual(await counts(running, 'count'), truth, `run ${run}: count equals the ground truth`);
        assert.deepEqual(await counts(running, 'totals'), truth, `run ${run}: totals (through the outbox) equal the ground truth`);
        assert.ok(restarts > 0, `run ${run}: chaos restarted partitions (${restarts})`);

        if (run === 2) {
          // Bad input: bytes that are not a Click, and a click of the producer's older epoch.
          const h = hosts[0]!;
          const p = clicks.partitionOf({ host: h, n: 0 });
          const raw = await broker.producer(topic('clicks', p), { producer: producerId('raw-src') });
          const old = await broker.producer(topic('clicks', p), { producer: producerId('clicks-src') });
          const seqOld = epochSequence(1, 10_000);
          await running.counters.sending('clicks', { producer: 'raw-src', topic: `clicks/${p}`, sequence: 0 }, () => raw.send(Uint8Array.of(0xc1, 0xff)));
          await running.counters.sending('clicks', { producer: 'clicks-src', topic: `clicks/${p}`, sequence: seqOld }, () =>
            old.send(clicks.codec.encode({ host: h, n: -1 }), { sequence: seqOld }));
          await running.quiescence({ timeoutMs: 120_000 });
          const dead = await running.deadLetters('count');
          assert.equal(dead.length, 2, JSON.stringify(dead.map((d) => d.reason)));
          assert.match(dead.find((d) => d.message.producer === 'raw-src')!.reason, /Click: bytes are not msgpack/);
          assert.match(dead.find((d) => d.message.producer === 'clicks-src')!.reason, /epoch 1 .* older than its epoch 2 .*fenced-off older incarnation/);
          assert.deepEqual(await counts(running, 'count'), truth, 'dead-lettered messages have no effect');
          await raw.close();
          await old.close();
        }
        await running.stop();
        await broker.close();
      } catch (err) {
        await running.stop().catch(() => undefined);
        await broker.close().catch(() => undefined);
        throw err;
      }
    }
    // A data dir run with 8 partitions is refused under 4, before anything runs (by its
    // record; each store checks its own shape too, checkStageShape).
    const broker = await makeBroker();
    try {
      await assert.rejects(clickTopology(4).topology.start({ broker, dataDir: dir, logger: quiet }), (err: unknown) =>
        err instanceof DataDirError && /stage count was run with 8 partitions \(fnv1a\/8\), not 4 \(fnv1a\/4\)/.test(err.message));
    } finally {
      await broker.close(); // an open broker connection kept a failed test's process (and its lane) running
    }
  } finally {
    rmDir();
    await cleanup();
  }
}

/**
 * A broker test's answer to an unreachable broker: skips `t` with the reason, or fails it
 * when `SHARDFLOW_REQUIRE_BROKERS=1` (CI).
 * @returns true when the test must stop here (skipped)
 */
export function skipUnlessRequired(t: TestContext, name: string, reason: string | undefined): boolean {
  if (reason === undefined) return false;
  if (process.env.SHARDFLOW_REQUIRE_BROKERS === '1') assert.fail(`${name} is required (SHARDFLOW_REQUIRE_BROKERS=1) but unavailable: ${reason}`);
  t.skip(`${name} unavailable: ${reason}`);
  return true;
}
