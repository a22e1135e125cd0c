import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assignPartitions, InvalidArgumentError, type AssignableWorker, type AssignmentResult, type PartitionUnit } from '../src/index.js';

/**
 * The leader's assignment as a pure function: balanced by count, sticky (a join or a leave
 * moves only what it must), at most `maxMoves` rebalancing moves per round, caps respected.
 */
const units = (stages: Record<string, number>): PartitionUnit[] =>
  Object.entries(stages).flatMap(([stage, n]) => Array.from({ length: n }, (_, partition) => ({ stage, partition })));
const workers = (...ids: string[]): AssignableWorker[] => ids.map((id) => ({ id, maxPartitions: Infinity }));
const counts = (r: AssignmentResult) => {
  const out = new Map<string, number>();
  for (const w of r.assignment.values()) out.set(w, (out.get(w) ?? 0) + 1);
  return out;
};
const spread = (r: AssignmentResult) => {
  const c = [...counts(r).values()];
  return Math.max(...c) - Math.min(...c);
};
/** Runs rounds from `current` until no move is made; returns every round. */
function rounds(input: Omit<Parameters<typeof assignPartitions>[0], 'current'> & { current: Map<string, string> }): AssignmentResult[] {
  const out: AssignmentResult[] = [];
  let current = input.current;
  for (let i = 0; i < 100; i++) {
    const r = assignPartitions({ ...input, current });
    out.push(r);
    if (r.moves.length === 0 && r.placed.length === 0) return out;
    current = r.assignment;
  }
  throw new Error('assignment did not settle in 100 rounds');
}

const U = units({ count: 6, totals: 2 });

test('a first assignment places every unit, balanced by count and spread over stages', () => {
  const r = assignPartitions({ units: U, workers: workers('a', 'b', 'c'), current: new Map(), maxMoves: 0 });
  assert.equal(r.placed.length, 8);
  assert.deepEqual(r.moves, []);
  assert.deepEqual([...counts(r).values()].sort(), [2, 3, 3]);
  const perStage = (w: string, stage: string) => [...r.assignment].filter(([u, o]) => o === w && u.startsWith(`${stage}/`)).length;
  for (const w of ['a', 'b', 'c']) assert.equal(perStage(w, 'count'), 2, `worker ${w} holds 2 of the 6 count partitions`);
  const again = assignPartitions({ units: U, workers: workers('a', 'b', 'c'), current: r.assignment, maxMoves: 5 });
  assert.deepEqual(again.moves, [], 'a balanced assignment is a fixed point');
  assert.deepEqual(again.assignment, r.assignment);
});

test('a join moves exactly the units the balance needs, each from a worker above it', () => {
  const start = assignPartitions({ units: units({ s: 12 }), workers: workers('a', 'b', 'c'), current: new Map(), maxMoves: 0 });
  assert.deepEqual([...counts(start).values()], [4, 4, 4]);
  const all = rounds({ units: units({ s: 12 }), workers: workers('a', 'b', 'c', 'd'), current: start.assignment, maxMoves: 10 });
  const moves = all.flatMap((r) => r.moves);
  assert.equal(moves.length, 3, '4,4,4,0 -> 3,3,3,3 needs 3 moves');
  assert.ok(moves.every((m) => m.to === 'd'), 'every move goes to the new worker');
  assert.equal(new Set(moves.map((m) => m.from)).size, 3, 'one unit from each old worker');
  const last = all.at(-1)!;
  for (const [u, w] of start.assignment) if (!moves.some((m) => m.unit === u)) assert.equal(last.assignment.get(u), w, `${u} stays with ${w}`);
});

test('a leave moves only the leaver\'s units and keeps the balance', () => {
  const start = assignPartitions({ units: U, workers: workers('a', 'b', 'c'), current: new Map(), maxMoves: 0 });
  const leaver = 'b';
  const r = assignPartitions({ units: U, workers: workers('a', 'c'), current: start.assignment, maxMoves: 10 });
  assert.deepEqual(r.moves, [], 'no unit of a live worker moves');
  assert.deepEqual(r.placed.sort(), [...start.assignment].filter(([, w]) => w === leaver).map(([u]) => u).sort());
  for (const [u, w] of start.assignment) if (w !== leaver) assert.equal(r.assignment.get(u), w);
  assert.ok(spread(r) <= 1, `balanced after the leave: ${JSON.stringify([...counts(r)])}`);
});

test('rebalancing moves are capped per round; the rounds reach the same balance', () => {
  const lopsided = new Map(units({ s: 10 }).map((u) => [`${u.stage}/${u.partition}`, 'a']));
  const capped = rounds({ units: units({ s: 10 }), workers: workers('a', 'b', 'c', 'd', 'e'), current: lopsided, maxMoves: 2 });
  assert.ok(capped.every((r) => r.moves.length <= 2), 'at most 2 moves per round');
  assert.equal(capped.flatMap((r) => r.moves).length, 8, '10,0,0,0,0 -> 2,2,2,2,2 is 8 moves');
  assert.equal(spread(capped.at(-1)!), 0);
  const none = assignPartitions({ units: units({ s: 10 }), workers: workers('a', 'b'), current: lopsided, maxMoves: 0 });
  assert.deepEqual(none.assignment, lopsided, 'maxMoves 0 keeps every live owner');
});

test('maxPartitions caps a worker; what no worker has room for is reported unplaced', () => {
  const ws: AssignableWorker[] = [{ id: 'small', maxPartitions: 1 }, { id: 'big', maxPartitions: 4 }];
  const r = assignPartitions({ units: U, workers: ws, current: new Map(), maxMoves: 10 });
  assert.equal(counts(r).get('small'), 1);
  assert.equal(counts(r).get('big'), 4);
  assert.equal(r.unplaced.length, 3, '8 units, room for 5');
  const lowered = assignPartitions({ units: U, workers: [{ id: 'small', maxPartitions: 0 }, { id: 'big', maxPartitions: 8 }], current: r.assignment, maxMoves: 0 });
  assert.equal(counts(lowered).get('small'), undefined, 'a worker over its (lowered) cap gives its units up');
  assert.equal(lowered.unplaced.length, 0);
  assert.equal(assignPartitions({ units: U, workers: [], current: r.assignment, maxMoves: 1 }).unplaced.length, 8, 'no live worker: nothing placed');
});

test('bad input is refused with a clear error', () => {
  assert.throws(() => assignPartitions({ units: U, workers: workers('a'), current: new Map(), maxMoves: -1 }), InvalidArgumentError);
  assert.throws(() => assignPartitions({ units: U, workers: workers('a', 'a'), current: new Map(), maxMoves: 1 }), /given twice/);
  assert.throws(() => assignPartitions({ units: U, workers: [{ id: 'a', maxPartitions: 1.5 }], current: new Map(), maxMoves: 1 }), /maxPartitions/);
});

test('standbys: each unit gets standbyReplicas other workers, spread; kept while live and not the owner; a dead owner\'s units go to their standbys within one unit of the balance', () => {
  const W = workers('a', 'b', 'c', 'd');
  const first = assignPartitions({ units: U, workers: W, current: new Map(), maxMoves: 0, standbyReplicas: 1 });
  assert.equal(first.standbys.size, U.length);
  for (const [u, ids] of first.standbys) {
    assert.equal(ids.length, 1);
    assert.notEqual(ids[0], first.assignment.get(u), `${u}: its standby is not its owner`);
  }
  const held = new Map<string, number>();
  for (const ids of first.standbys.values()) for (const id of ids) held.set(id, (held.get(id) ?? 0) + 1);
  assert.deepEqual([...held.values()].sort(), [2, 2, 2, 2], 'standbys spread over the workers');
  const again = assignPartitions({ units: U, workers: W, current: first.assignment, maxMoves: 2, standbyReplicas: 1, standbys: first.standbys });
  assert.deepEqual(again.standbys, first.standbys, 'a settled assignment keeps its standbys');

  // Worker a dies: each of its units goes to its standby when that stays within one unit of the balance.
  const lost = [...first.assignment].filter(([, w]) => w === 'a').map(([u]) => u);
  const after = assignPartitions({ units: U, workers: W.filter((w) => w.id !== 'a'), current: first.assignment, maxMoves: 2, standbyReplicas: 1, standbys: first.standbys });
  assert.deepEqual(after.placed.sort(), [...lost].sort());
  assert.ok(after.placedOnStandby.length >= 1, 'a\'s units went to their standbys where the balance allowed');
  for (const u of after.placedOnStandby) assert.equal(after.assignment.get(u), first.standbys.get(u)![0]);
  assert.ok(spread(after) <= 1);
  assert.deepEqual(after.moves, [], 'a leave moves only the leaver\'s units, standbys or not');
  for (const [u, ids] of after.standbys) {
    assert.ok(!ids.includes('a') && !ids.includes(after.assignment.get(u)!), `${u}: standbys ${ids.join(',')} are live and not its owner`);
    assert.equal(ids.length, 1);
  }

  // Two standbys each, on three workers: every other worker; never more than exist.
  const two = assignPartitions({ units: U, workers: workers('a', 'b', 'c'), current: new Map(), maxMoves: 0, standbyReplicas: 2 });
  for (const [u, ids] of two.standbys) assert.deepEqual([...ids, two.assignment.get(u)].sort(), ['a', 'b', 'c']);
  const alone = assignPartitions({ units: U, workers: workers('a'), current: new Map(), maxMoves: 0, standbyReplicas: 1 });
  assert.equal(alone.standbys.size, 0, 'a single worker has no one to stand by');
  assert.throws(() => assignPartitions({ units: U, workers: W, current: new Map(), maxMoves: 0, standbyReplicas: -1 }), InvalidArgumentError);
});

test('standbys: a dead owner\'s units go to their standbys only within the balance (no other unit moves); joiners get their share; only workers that keep standbys and have room are chosen', () => {
  // Worker a's four units all stand by on b: b may take one (it holds no more than the least
  // loaded), the others go to the least loaded; no healthy unit moves (found by a new user:
  // standbys taken one unit above the balance made step 3 move another unit).
  const units8 = units({ count: 8 });
  const current = new Map(units8.map((u, i) => [`count/${u.partition}`, ['a', 'b', 'c'][Math.min(2, Math.floor(i / 3))]!]));
  current.set('count/6', 'c');
  current.set('count/7', 'a'); // a: 0,1,2,7; b: 3,4,5; c: 6
  const standbys = new Map([...current].map(([u, w]) => [u, [w === 'b' ? 'c' : 'b']]));
  const r = assignPartitions({ units: units8, workers: workers('b', 'c'), current, maxMoves: 4, standbyReplicas: 1, standbys });
  assert.deepEqual(r.moves, []);
  assert.ok(spread(r) <= 1, JSON.stringify([...counts(r)]));
  for (const u of r.placedOnStandby) assert.equal(r.assignment.get(u), 'b');

  // A worker that joins gets standbys; one that does not keep standbys, or has no room, gets none.
  const W3 = workers('a', 'b', 'c');
  const before = assignPartitions({ units: U, workers: W3, current: new Map(), maxMoves: 0, standbyReplicas: 1 });
  const joined = assignPartitions({ units: U, workers: [...W3, { id: 'd', maxPartitions: Infinity }], current: before.assignment, maxMoves: 0, standbyReplicas: 1, standbys: before.standbys });
  const heldBy = (res: AssignmentResult, id: string) => [...res.standbys.values()].filter((ids) => ids.includes(id)).length;
  assert.ok(heldBy(joined, 'd') >= 1, `the joiner stands by for its share (${heldBy(joined, 'd')})`);
  const mixed = assignPartitions({
    units: U, current: new Map(), maxMoves: 0, standbyReplicas: 2,
    workers: [{ id: 'a', maxPartitions: Infinity }, { id: 'b', maxPartitions: Infinity, standby: false }, { id: 'c', maxPartitions: 2 }, { id: 'd', maxPartitions: Infinity }],
  });
  assert.equal(heldBy(mixed, 'b'), 0, 'b does not keep standbys');
  assert.equal(heldBy(mixed, 'c'), 0, 'c is full (maxPartitions 2)');
  for (const [u, ids] of mixed.standbys) assert.ok(ids.every((id) => id !== mixed.assignment.get(u)));
});
