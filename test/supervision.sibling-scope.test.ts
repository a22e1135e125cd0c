import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActorSystem, type ActorRef } from '../src/runtime/actor/index.js';
import { SupervisorStrategy, type ChildSpec } from '../src/runtime/supervision/index.js';
import { ManualClock, recordingBehavior, recordingLogger, settle, type Recording } from './kit/index.js';

async function threeChildren(strategy: SupervisorStrategy) {
  const journal: string[] = [];
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  const children: ChildSpec[] = ['a', 'b', 'c'].map((name) => ({ name, behavior: recordingBehavior(name, journal) }));
  system.supervise('sup', strategy, children);
  await settle();
  journal.length = 0;
  const b = system.lookup<Recording, string>('/sup/b') as ActorRef<Recording, string>;
  return { journal, system, b };
}

test('supervisor starts its children in order', async () => {
  const journal: string[] = [];
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  system.supervise('sup', SupervisorStrategy.oneForOne(), [
    { name: 'a', behavior: recordingBehavior('a', journal) },
    { name: 'inner', strategy: SupervisorStrategy.oneForOne(), children: [{ name: 'b', behavior: recordingBehavior('b', journal) }] },
    { name: 'c', behavior: recordingBehavior('c', journal) },
  ]);
  assert.ok(system.lookup('/sup/inner/b'), 'children exist before they start');
  await settle();
  assert.deepEqual(journal, ['a:start#1', 'b:start#1', 'c:start#1']);
  assert.equal(system.tree().children[0]?.children[1]?.kind, 'supervisor');
  await system.terminate();
});

test('one-for-one restarts only the failed child', async () => {
  const { journal, system, b } = await threeChildren(SupervisorStrategy.oneForOne());
  await b.tell({ op: 'throw', error: new Error('b broke') });
  await settle();
  assert.deepEqual(journal, ['b:stop#1', 'b:start#2']);
  await system.terminate();
});

test('one-for-all stops every sibling last-started first, then starts all in order', async () => {
  const { journal, system, b } = await threeChildren(SupervisorStrategy.oneForAll());
  await b.tell({ op: 'throw', error: new Error('b broke') });
  await settle();
  assert.deepEqual(journal, ['c:stop#1', 'b:stop#1', 'a:stop#1', 'a:start#2', 'b:start#2', 'c:start#2']);
  assert.deepEqual(system.tree().children[0]?.children.map((n) => [n.status, n.restarts]), [
    ['running', 1],
    ['running', 1],
    ['running', 1],
  ]);
  await system.terminate();
});

test('rest-for-one restarts the failed child and those started after it', async () => {
  const { journal, system, b } = await threeChildren(SupervisorStrategy.restForOne());
  await b.tell({ op: 'throw', error: new Error('b broke') });
  await settle();
  assert.deepEqual(journal, ['c:stop#1', 'b:stop#1', 'b:start#2', 'c:start#2']);
  await system.terminate();
});

test('one-for-all with a stop directive stops the whole group', async () => {
  const { journal, system, b } = await threeChildren(SupervisorStrategy.oneForAll('stop'));
  await b.tell({ op: 'throw', error: new Error('b broke') });
  await settle();
  assert.deepEqual(journal, ['c:stop#1', 'b:stop#1', 'a:stop#1']);
  assert.equal(system.tree().children[0]?.children.length, 0);
  await system.terminate();
});

test('refs to supervised children stay valid across restarts', async () => {
  const { system, b } = await threeChildren(SupervisorStrategy.oneForAll());
  await b.tell({ op: 'throw', error: new Error('b broke') });
  const answer = b.ask({ op: 'work', id: 'q' });
  await settle();
  assert.equal(await answer, 'q@2');
  await system.terminate();
});
