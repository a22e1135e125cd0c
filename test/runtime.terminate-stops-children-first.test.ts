import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActorSystem, type Behavior } from '../src/runtime/actor/index.js';
import type { LifecycleEvent } from '../src/runtime/inspection.js';
import { SupervisorStrategy } from '../src/runtime/supervision/index.js';
import { ManualClock, recordingBehavior, recordingLogger, settle } from './kit/index.js';

/** A parent that spawns two children from start(). */
function parent(name: string, journal: string[]): Behavior<string, void, void> {
  return {
    kind: 'parent',
    start: (ctx) => {
      journal.push(`${name}:start`);
      ctx.spawn('c1', recordingBehavior(`${name}/c1`, journal));
      ctx.spawn('c2', recordingBehavior(`${name}/c2`, journal));
    },
    receive: () => undefined,
    stop: () => void journal.push(`${name}:stop`),
  };
}

test('terminate() stops children before their parent, last started first, running every stop()', async () => {
  const journal: string[] = [];
  const events: LifecycleEvent[] = [];
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  system.events$.subscribe({ next: (event) => events.push(event), complete: () => events.push({ type: '@shardflow.stopped', path: 'complete', kind: '', at: 0 }) });
  system.spawn('p', parent('p', journal));
  system.supervise('sup', SupervisorStrategy.oneForOne(), [
    { name: 'x', behavior: recordingBehavior('x', journal) },
    { name: 'y', behavior: recordingBehavior('y', journal) },
  ]);
  await settle();
  journal.length = 0;
  const termination = await system.terminate();
  assert.deepEqual(termination, { kind: 'terminated' });
  assert.deepEqual(journal, ['y:stop#1', 'x:stop#1', 'p/c2:stop#1', 'p/c1:stop#1', 'p:stop']);
  const stopped = events.filter((e) => e.type === '@shardflow.stopped').map((e) => e.path);
  assert.deepEqual(stopped, ['/sup/y', '/sup/x', '/sup', '/p/c2', '/p/c1', '/p', '/', 'complete']);
  assert.equal(await system.whenTerminated, termination);
  assert.equal(await system.terminate(), termination, 'idempotent');
});

test('restarting a parent stops its spawned children first; its new start() spawns them again', async () => {
  const journal: string[] = [];
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  const failing: Behavior<string, void, void> = { ...parent('p', journal), receive: () => { throw new Error('parent broke'); } };
  const ref = system.spawn('p', failing, { supervision: SupervisorStrategy.restart });
  await settle();
  journal.length = 0;
  await ref.tell('boom');
  await settle();
  assert.deepEqual(journal, ['p/c2:stop#1', 'p/c1:stop#1', 'p:stop', 'p:start', 'p/c1:start#1', 'p/c2:start#1']);
  assert.deepEqual(system.tree().children[0]?.children.map((n) => n.path), ['/p/c1', '/p/c2']);
  await system.terminate();
});

test('tree() and renderTree() show status, processed, restarts and mailbox depth', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  const journal: string[] = [];
  system.supervise('sup', SupervisorStrategy.oneForOne(), [{ name: 'w', behavior: recordingBehavior('w', journal) }]);
  await settle();
  const w = system.lookup('/sup/w');
  await w?.tell({ op: 'work', id: '1' });
  await w?.tell({ op: 'throw', error: Object.assign(new Error('flaky'), { code: 'SF_ERR_BROKER_DISCONNECTED' }) });
  await settle();
  const tree = system.tree();
  assert.equal(tree.path, '/');
  assert.equal(tree.kind, 'guardian');
  const node = tree.children[0]?.children[0];
  assert.deepEqual(
    { path: node?.path, kind: node?.kind, status: node?.status, processed: node?.processed, restarts: node?.restarts, depth: node?.mailboxDepth },
    { path: '/sup/w', kind: 'recorder', status: 'running', processed: 1, restarts: 1, depth: 0 },
  );
  assert.deepEqual(node?.lastError, { name: 'Error', message: 'flaky', code: 'SF_ERR_BROKER_DISCONNECTED' });
  assert.equal(
    system.renderTree(),
    [
      '/ [guardian] running processed=0 restarts=0 mailbox=0',
      '  sup [supervisor] running processed=0 restarts=0 mailbox=0',
      '    w [recorder] running processed=1 restarts=1 mailbox=0 lastError=SF_ERR_BROKER_DISCONNECTED: flaky',
    ].join('\n'),
  );
  await system.terminate();
});

test('every actor runs an xstate lifecycle actor: inspection sees its snapshots', async () => {
  const values: string[] = [];
  const system = ActorSystem.create({
    name: 'test',
    clock: new ManualClock(),
    logger: recordingLogger(),
    inspect: (event) => {
      if (event.type === '@xstate.snapshot' && (event.snapshot as { context?: { path?: string } }).context?.path === '/a') {
        values.push(String((event.snapshot as { value?: unknown }).value));
      }
    },
  });
  const ref = system.spawn('a', recordingBehavior('a', []), { supervision: SupervisorStrategy.restart });
  await ref.tell({ op: 'throw', error: new Error('x') });
  await settle();
  await system.terminate();
  assert.deepEqual(values, ['starting', 'running', 'failed', 'restarting', 'running', 'stopping', 'stopped']);
});
