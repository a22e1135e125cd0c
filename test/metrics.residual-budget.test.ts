import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addResidual, budgetThreshold, emptyHistogram, residualBucket } from '../src/actors/metrics/residualHistogram.js';
import { seededRandom } from '../src/runtime/supervision/seededRandom.js';

test('the budget threshold leaves at most the budget unpushed, and pushes the largest residuals first', () => {
  const random = seededRandom(7);
  // Two partitions' residuals after a change: many tiny ones spread everywhere (what a
  // converged computation leaves), a few large ones (a change's corrections), both signs.
  const partitions = [[], []] as number[][];
  for (let i = 0; i < 20_000; i++) partitions[i % 2]!.push((random() - 0.5) * 1e-7);
  for (let i = 0; i < 200; i++) partitions[i % 2]!.push((random() < 0.5 ? -1 : 1) * (1e-4 + random() * 1e-2));
  const histograms = partitions.map((rs) => {
    const h = emptyHistogram();
    for (const r of rs) addResidual(h, r);
    return h;
  });
  const all = partitions.flat();
  const total = all.reduce((t, r) => t + Math.abs(r), 0);
  const below = (t: number) => all.filter((r) => Math.abs(r) <= t).reduce((s, r) => s + Math.abs(r), 0);
  const above = (t: number) => all.filter((r) => Math.abs(r) > t).length;
  for (const budget of [0, 1e-9, 1e-5, 5e-4, 0.1, total / 2, total]) {
    const t = budgetThreshold(histograms, budget);
    assert.ok(below(t) <= budget, `budget ${budget}: ${below(t)} left below ${t}`);
    if (budget < total) assert.ok(above(t) > 0, `budget ${budget}: something to push above ${t}`);
  }
  // A budget just above the tiny residuals' mass (about 5e-4, less than one large residual
  // more) pushes the large ones only.
  const tiny = below(1e-7);
  const t = budgetThreshold(histograms, tiny * 1.01);
  assert.equal(above(t), 200);
  assert.ok(t > 1e-7, `threshold ${t} above every tiny residual`);
  assert.equal(budgetThreshold(histograms, total * (1 + 1e-9)), Infinity, 'nothing to push when the budget holds it all');
  assert.equal(above(budgetThreshold(histograms, 0)), all.filter((r) => r !== 0).length, 'a zero budget pushes every nonzero residual');
  // A residual exactly at a bucket's lower edge is pushed when its bucket must be.
  const edge = emptyHistogram();
  addResidual(edge, 2 ** -20);
  assert.ok(2 ** -20 > budgetThreshold([edge], 0));
  assert.equal(residualBucket(2 ** -20), residualBucket(2 ** -20 * 1.999));
  assert.equal(residualBucket(Number.MIN_VALUE), 0);
  assert.equal(residualBucket(1e300), residualBucket(1e200));
});
