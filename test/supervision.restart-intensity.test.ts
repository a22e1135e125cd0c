import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActorSystem } from '../src/runtime/actor/index.js';
import type { LifecycleEvent } from '../src/runtime/inspection.js';
import { SupervisorStrategy } from '../src/runtime/supervision/index.js';
import { ManualClock, recordingBehavior, recordingLogger, settle } from './kit/index.js';

test('more than maxRestarts restarts within withinMs escalates RestartIntensityExceededError', async () => {
  const clock = new ManualClock();
  const journal: string[] = [];
  const events: LifecycleEvent[] = [];
  const system = ActorSystem.create({ name: 'test', clock, logger: recordingLogger() });
  system.events$.subscribe((event) => events.push(event));
  const strategy = SupervisorStrategy.oneForOne().withLimit(2, 1000);
  const ref = system.spawn('a', recordingBehavior('a', journal), { supervision: strategy });
  const boom = new Error('again');
  for (let i = 0; i < 2; i++) {
    await ref.tell({ op: 'throw', error: boom });
    await settle();
    clock.advance(100);
  }
  assert.equal(system.tree().children[0]?.restarts, 2);
  await ref.tell({ op: 'throw', error: boom }); // third failure inside 1000 ms
  const termination = await system.whenTerminated;
  assert.equal(termination.kind, 'failed');
  const error = termination.kind === 'failed' ? (termination.error as Error & { code: string; cause: unknown }) : undefined;
  assert.equal(error?.code, 'SF_ERR_RESTART_INTENSITY');
  assert.equal(error?.cause, boom);
  const escalated = events.find((e) => e.type === '@shardflow.escalated');
  assert.equal(escalated?.path, '/a');
  assert.deepEqual(journal, ['a:start#1', 'a:stop#1', 'a:start#2', 'a:stop#2', 'a:start#3', 'a:stop#3']);
});

test('restarts older than withinMs fall out of the window', async () => {
  const clock = new ManualClock();
  const journal: string[] = [];
  const system = ActorSystem.create({ name: 'test', clock, logger: recordingLogger() });
  const ref = system.spawn('a', recordingBehavior('a', journal), { supervision: SupervisorStrategy.oneForOne().withLimit(2, 1000) });
  for (let i = 0; i < 5; i++) {
    await ref.tell({ op: 'throw', error: new Error(`failure ${i}`) });
    await settle();
    clock.advance(600); // at most 2 restarts in any 1000 ms window
  }
  assert.equal(system.tree().children[0]?.restarts, 5);
  assert.equal(system.tree().children[0]?.status, 'running');
  await system.terminate();
});

test('one-for-all counts restarts per supervisor and escalates the supervisor to its parent', async () => {
  const clock = new ManualClock();
  const journal: string[] = [];
  const events: LifecycleEvent[] = [];
  const system = ActorSystem.create({ name: 'test', clock, logger: recordingLogger() });
  system.events$.subscribe((event) => events.push(event));
  system.supervise('outer', SupervisorStrategy.oneForOne(), [
    {
      name: 'group',
      strategy: SupervisorStrategy.oneForAll().withLimit(1, 10_000),
      children: [
        { name: 'a', behavior: recordingBehavior('a', journal) },
        { name: 'b', behavior: recordingBehavior('b', journal) },
      ],
    },
  ]);
  await settle();
  await system.lookup('/outer/group/a')?.tell({ op: 'throw', error: new Error('a') });
  await settle();
  await system.lookup('/outer/group/b')?.tell({ op: 'throw', error: new Error('b') });
  await settle();
  const escalated = events.filter((e) => e.type === '@shardflow.escalated');
  assert.deepEqual(escalated.map((e) => e.path), ['/outer/group/b']);
  assert.ok(events.some((e) => e.type === '@shardflow.restarted' && e.path === '/outer/group'));
  assert.equal(system.tree().children[0]?.children[0]?.status, 'running');
  await system.terminate();
});
