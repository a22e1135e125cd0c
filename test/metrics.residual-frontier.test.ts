import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ResidualFrontier, SlotQueue } from '../src/actors/metrics/residualFrontier.js';
import { addResidual, emptyHistogram } from '../src/actors/metrics/residualHistogram.js';
import { seededRandom } from '../src/runtime/supervision/seededRandom.js';

test('the residual frontier keeps sum |r| and sum x within its error bound through a million updates, lists every page over a threshold and the touched ones', () => {
  const random = seededRandom(18);
  const pages = 5_000;
  const r = new Float64Array(pages);
  const x = new Float64Array(pages);
  const frontier = new ResidualFrontier();
  // A fresh start (every page 0.15), then pushes that move most of r into x and spread
  // shrinking residuals: the magnitudes fall by many orders, the drift must not follow.
  for (let p = 0; p < pages; p++) {
    r[p] = 0.15;
    frontier.account(p, r[p]!, 0);
  }
  for (let step = 0; step < 1_000_000; step++) {
    const p = Math.floor(random() * pages);
    const scale = 0.15 * 0.9999 ** (step / 50);
    x[p]! += r[p]!;
    r[p] = (random() - 0.5) * scale * (random() < 0.01 ? 100 : 1);
    frontier.account(p, r[p]!, x[p]!);
  }
  let exactR = 0;
  let exactX = 0;
  const histogram = emptyHistogram();
  for (let p = 0; p < pages; p++) {
    exactR += Math.abs(r[p]!);
    exactX += x[p]!;
    addResidual(histogram, r[p]!);
  }
  const remaining = frontier.remaining();
  assert.ok(remaining >= exactR, `remaining ${remaining} is an upper bound of ${exactR}`);
  assert.ok(remaining <= exactR * (1 + 1e-6), `remaining ${remaining} stays close to ${exactR}`);
  assert.ok(frontier.sumX() <= exactX && frontier.sumX() >= exactX * (1 - 1e-9), `sumX ${frontier.sumX()} a close lower bound of ${exactX}`);
  frontier.histogram().forEach((m, b) => assert.ok(Math.abs(m - histogram[b]!) <= 1e-9 * exactR + 1e-6 * histogram[b]!, `bucket ${b}: ${m} against ${histogram[b]}`));

  // Candidates: a superset of the pages over the threshold, plus the touched ones.
  const threshold = Math.max(...Array.from(r, Math.abs)) / 16;
  frontier.touch(7);
  frontier.touch(7);
  const candidates = new Set(frontier.candidates(threshold));
  for (let p = 0; p < pages; p++) if (Math.abs(r[p]!) > threshold) assert.ok(candidates.has(p), `page ${p} (|r| ${Math.abs(r[p]!)}) over ${threshold} is listed`);
  assert.ok(candidates.has(7), 'a touched page is listed');
  assert.ok(candidates.size < pages / 4, `${candidates.size} candidates of ${pages}: not every page`);
  // The threshold's own bucket is filtered: a page under the threshold, not touched, is left out.
  const under = [...Array(pages).keys()].filter((p) => p !== 7 && Math.abs(r[p]!) <= threshold);
  assert.ok(under.length > 0);
  for (const p of under) assert.ok(!candidates.has(p), `page ${p} (|r| ${Math.abs(r[p]!)}) under ${threshold}, not touched, is not listed`);
  // With the threshold at a page's accounted |r| (less than the rounding margin under it), that page is listed.
  const at = [...Array(pages).keys()].find((p) => p !== 7 && Math.abs(r[p]!) > 0)!;
  assert.ok(new Set(frontier.candidates(Math.abs(r[at]!) * (1 + 2 ** -30))).has(at), 'a page within the rounding margin under the threshold is listed');
  assert.deepEqual(frontier.candidates(Infinity), [7], 'Infinity lists the touched pages only');
  frontier.account(7, r[7]!, x[7]!);
  frontier.clearTouched();
  assert.deepEqual(frontier.touched, []);
  frontier.account(3, Number.NaN, x[3]!);
  assert.equal(frontier.remaining(), Infinity, 'a residual that is not finite holds the bound up');
});

test('the slot queue pops slots in key order, each once while queued', () => {
  const random = seededRandom(3);
  const key = (slot: number) => (slot * 7919) % 10_007;
  const queue = new SlotQueue(key);
  const added = new Set<number>();
  for (let i = 0; i < 3_000; i++) {
    const slot = Math.floor(random() * 10_007);
    queue.add(slot);
    added.add(slot);
  }
  assert.ok(queue.has([...added][0]!));
  const popped: number[] = [];
  for (let s = queue.pop(); s >= 0; s = queue.pop()) popped.push(s);
  assert.equal(popped.length, added.size, 'a slot added twice is queued once');
  for (let i = 1; i < popped.length; i++) assert.ok(key(popped[i - 1]!) < key(popped[i]!), 'ascending keys');
  assert.equal(queue.has(popped[0]!), false);
  assert.equal(queue.pop(), -1);
});

test('a reset slot queue forgets what was queued and pops by its new key', () => {
  const queue = new SlotQueue((slot) => slot);
  for (const slot of [5, 1, 9, 3]) queue.add(slot);
  assert.equal(queue.pop(), 1);
  queue.reset((slot) => -slot); // descending slots from now on
  for (const slot of [5, 9, 3]) assert.equal(queue.has(slot), false, `slot ${slot} left from before the reset`);
  for (const slot of [2, 8, 4, 8]) queue.add(slot);
  const popped: number[] = [];
  for (let s = queue.pop(); s >= 0; s = queue.pop()) popped.push(s);
  assert.deepEqual(popped, [8, 4, 2]);
});
