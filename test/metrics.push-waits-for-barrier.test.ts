import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { MetricMessage, PushDeferred, PushReport, RoundApplied } from '../src/actors/metrics/metricActor.js';
import { graphs } from './kit/datasets.js';
import { withLoadedWebIndex } from './kit/loadedIndex.js';

const partitions = 4;

// A cluster host answers a round's barrier before any checkpoint holds what it counted
// (docs/checkpoints.md, "The web index", (4)): a partition restored from an older checkpoint
// has neither those folds nor the barrier's record. The coordinator's next push carries the
// barrier (`push.barrier`), and the metric actor records it before it pushes, so that push
// waits until that many messages of the round are folded, as after an `await-applied`.
test('a push carrying the previous barrier waits until this partition has folded that many messages of the round', { timeout: 120_000 }, async () => {
  await withLoadedWebIndex(graphs.polblogs, partitions, async (index) => {
    const ask = (q: number, message: MetricMessage) => index.system.lookup<MetricMessage, unknown>(`/partitions/p${q}/metrics`)!.ask(message, { timeoutMs: 60_000 });
    // Round 1 pushed everywhere, no barrier asked; then every message of it applied.
    const reports = (await Promise.all(Array.from({ length: partitions }, (_, q) => ask(q, { type: 'push', round: 1, threshold: 0, damping: 0.85 })))) as PushReport[];
    const expected = Array.from({ length: partitions }, (_, q) => reports.reduce((t, r) => t + r.sent[q]!, 0));
    assert.ok(expected.every((c) => c > 0), `every partition was sent messages of round 1: ${expected.join(', ')}`);
    await index.quiescence({ pollMs: 10 });
    const applied = (await Promise.all(expected.map((_, q) => ask(q, { type: 'applied', round: 1 })))) as RoundApplied[];
    assert.deepEqual(applied.map((a) => a.messages), expected, 'each partition applied what the reports sent it');

    // Partition 0 told that one more message of round 1 was sent to it than it applied (what
    // a restored partition missing its folds looks like): its push of round 2 defers, and
    // nothing more arrives, so it never goes.
    const deferred = (await ask(0, { type: 'push', round: 2, threshold: 0, damping: 0.85, barrier: { round: 1, expected: expected[0]! + 1 } })) as PushDeferred;
    assert.ok('deferred' in deferred, `the push deferred instead of pushing: ${JSON.stringify(deferred).slice(0, 200)}`);
    let settled = false;
    deferred.deferred.then(() => (settled = true), () => (settled = true));
    await index.quiescence({ pollMs: 10 });
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(settled, false, 'the deferral waits for the message that never comes');
    assert.equal(((await ask(0, { type: 'last-round' })) as number), 1, 'partition 0 did not push round 2');

    // Partition 1 told its exact count: the messages are folded, so it pushes at once.
    const pushed = (await ask(1, { type: 'push', round: 2, threshold: 0, damping: 0.85, barrier: { round: 1, expected: expected[1]! } })) as PushReport;
    assert.equal(pushed.round, 2, `partition 1 pushed round 2: ${JSON.stringify(pushed).slice(0, 200)}`);
  });
});
