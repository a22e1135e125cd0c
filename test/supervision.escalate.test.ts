import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActorSystem, type ActorRef } from '../src/runtime/actor/index.js';
import type { LifecycleEvent } from '../src/runtime/inspection.js';
import { SupervisorStrategy } from '../src/runtime/supervision/index.js';
import { ManualClock, recordingBehavior, recordingLogger, settle, type Recording } from './kit/index.js';

test('escalate: the supervisor fails with the error and its parent restarts it with its children', async () => {
  const journal: string[] = [];
  const events: LifecycleEvent[] = [];
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  system.events$.subscribe((event) => events.push(event));
  system.supervise('outer', SupervisorStrategy.oneForOne(), [
    {
      name: 'inner',
      strategy: SupervisorStrategy.escalate,
      children: [
        { name: 'a', behavior: recordingBehavior('a', journal) },
        { name: 'b', behavior: recordingBehavior('b', journal) },
      ],
    },
  ]);
  await settle();
  journal.length = 0;
  const a = system.lookup<Recording, string>('/outer/inner/a') as ActorRef<Recording, string>;
  const boom = new Error('escalate me');
  await a.tell({ op: 'throw', error: boom });
  await settle();
  assert.deepEqual(journal, ['b:stop#1', 'a:stop#1', 'a:start#2', 'b:start#2']);
  const escalated = events.filter((e) => e.type === '@shardflow.escalated');
  assert.equal(escalated.length, 1);
  assert.equal(escalated[0]?.path, '/outer/inner/a');
  const innerFailed = events.find((e) => e.type === '@shardflow.failed' && e.path === '/outer/inner');
  assert.equal(innerFailed?.type === '@shardflow.failed' && innerFailed.reason, boom);
  assert.ok(events.some((e) => e.type === '@shardflow.restarted' && e.path === '/outer/inner'));
  assert.equal(await a.ask({ op: 'work', id: 'x' }), 'x@2');
  await system.terminate();
});

test('escalation to the root guardian terminates the system and surfaces the error', async () => {
  const journal: string[] = [];
  const events: LifecycleEvent[] = [];
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  system.events$.subscribe((event) => events.push(event));
  const top = system.spawn('top', recordingBehavior('top', journal), { supervision: SupervisorStrategy.escalate });
  const other = system.spawn('other', recordingBehavior('other', journal));
  const boom = new Error('unrecoverable');
  await top.tell({ op: 'throw', error: boom });
  const termination = await system.whenTerminated;
  assert.deepEqual(termination, { kind: 'failed', error: boom });
  assert.ok(journal.includes('top:stop#1'), 'suspended actor is still stopped on shutdown');
  assert.ok(journal.includes('other:stop#1'));
  assert.ok(events.some((e) => e.type === '@shardflow.escalated' && e.path === '/top'));
  assert.equal(system.tree().status, 'stopped');
  await assert.rejects(other.tell({ op: 'work', id: 'late' }), { code: 'SF_ERR_ACTOR_STOPPED' });
  assert.throws(() => system.spawn('again', recordingBehavior('again', journal)), { code: 'SF_ERR_ACTOR_STOPPED' });
  await settle();
});

test('resume of an escalated supervisor resumes its suspended child with its state', async () => {
  const journal: string[] = [];
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  system.supervise(
    'sup',
    SupervisorStrategy.escalate,
    [{ name: 'a', behavior: recordingBehavior('a', journal) }],
    { supervision: SupervisorStrategy.resume },
  );
  await settle();
  const a = system.lookup<Recording, string>('/sup/a') as ActorRef<Recording, string>;
  await a.tell({ op: 'throw', error: new Error('x') });
  await settle();
  assert.equal(await a.ask({ op: 'work', id: 'y' }), 'y@1');
  assert.deepEqual(journal, ['a:start#1', 'a:got y#1']);
  await system.terminate();
});
