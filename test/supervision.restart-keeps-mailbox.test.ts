import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActorSystem } from '../src/runtime/actor/index.js';
import type { LifecycleEvent } from '../src/runtime/inspection.js';
import { SupervisorStrategy } from '../src/runtime/supervision/index.js';
import { ManualClock, recordingBehavior, recordingLogger, settle } from './kit/index.js';

function setup() {
  const clock = new ManualClock();
  const journal: string[] = [];
  const events: LifecycleEvent[] = [];
  const system = ActorSystem.create({ name: 'test', clock, logger: recordingLogger() });
  system.events$.subscribe((event) => events.push(event));
  return { clock, journal, events, system };
}

test('restart: stop() runs before the new start(), the failing message is dropped, queued messages survive', async () => {
  const { journal, events, system } = setup();
  const ref = system.spawn('a', recordingBehavior('a', journal), { supervision: SupervisorStrategy.restart });
  await ref.tell({ op: 'throw', error: new Error('boom') });
  await ref.tell({ op: 'work', id: 'm1' });
  await ref.tell({ op: 'work', id: 'm2' });
  await settle();
  assert.deepEqual(journal, ['a:start#1', 'a:stop#1', 'a:start#2', 'a:got m1#2', 'a:got m2#2']);
  assert.deepEqual(
    events.filter((e) => e.path === '/a').map((e) => e.type),
    ['@shardflow.started', '@shardflow.failed', '@shardflow.restarted'],
  );
  const node = system.tree().children[0];
  assert.equal(node?.status, 'running');
  assert.equal(node?.restarts, 1);
  assert.equal(node?.processed, 2);
  assert.equal(node?.lastError?.message, 'boom');
  await system.terminate();
});

test('restart after an async rejection, and ctx.signal of the old incarnation is aborted', async () => {
  const { journal, system } = setup();
  const signals: AbortSignal[] = [];
  const base = recordingBehavior('a', journal);
  const ref = system.spawn('a', {
    ...base,
    start: (ctx) => {
      signals.push(ctx.signal);
      return base.start(ctx);
    },
  }, { supervision: SupervisorStrategy.restart });
  await ref.tell({ op: 'reject', error: new Error('async boom') });
  const reply = ref.ask({ op: 'work', id: 'after' });
  await settle();
  assert.equal(await reply, 'after@2');
  assert.equal(signals.length, 2);
  assert.equal(signals[0]?.aborted, true);
  assert.equal(signals[1]?.aborted, false);
  await system.terminate();
  assert.equal(signals[1]?.aborted, true);
});

test('ctx.fail() from outside receive() is supervised like a throw', async () => {
  const { journal, system } = setup();
  let fail: ((error: unknown) => void) | undefined;
  const base = recordingBehavior('a', journal);
  system.spawn('a', { ...base, start: (ctx) => ((fail = ctx.fail), base.start(ctx)) }, { supervision: SupervisorStrategy.restart });
  await settle();
  const first = fail;
  first?.(new Error('pipeline died'));
  await settle();
  first?.(new Error('stale report from incarnation 1')); // ignored: that incarnation ended
  await settle();
  assert.deepEqual(journal, ['a:start#1', 'a:stop#1', 'a:start#2']);
  await system.terminate();
});

test('resume keeps the state (no stop/start) and drops only the failing message', async () => {
  const { journal, system } = setup();
  const ref = system.spawn('a', recordingBehavior('a', journal), { supervision: SupervisorStrategy.resume });
  await ref.tell({ op: 'work', id: 'm1' });
  await ref.tell({ op: 'throw', error: new Error('bad input') });
  await ref.tell({ op: 'work', id: 'm2' });
  await settle();
  assert.deepEqual(journal, ['a:start#1', 'a:got m1#1', 'a:got m2#1']);
  assert.equal(system.tree().children[0]?.status, 'running');
  await system.terminate();
});

test('stop directive: stop() runs, queued asks reject with ActorStoppedError, tell rejects afterwards', async () => {
  const { journal, events, system } = setup();
  const ref = system.spawn('a', recordingBehavior('a', journal), { supervision: SupervisorStrategy.stop });
  await ref.tell({ op: 'throw', error: new Error('fatal') });
  const pending = assert.rejects(ref.ask({ op: 'work', id: 'never' }), { code: 'SF_ERR_ACTOR_STOPPED' });
  await settle();
  await pending;
  await assert.rejects(ref.tell({ op: 'work', id: 'late' }), { code: 'SF_ERR_ACTOR_STOPPED' });
  assert.deepEqual(journal, ['a:start#1', 'a:stop#1']);
  assert.ok(events.some((e) => e.type === '@shardflow.stopped' && e.path === '/a'));
  assert.equal(system.lookup('/a'), undefined);
  assert.equal(system.tree().children.length, 0);
  await system.terminate();
});

test('decider per error code: stop on SF_ERR_STORE_CORRUPTION, restart otherwise', async () => {
  const { journal, system } = setup();
  const strategy = SupervisorStrategy.oneForOne().on('SF_ERR_STORE_CORRUPTION', 'stop');
  const ref = system.spawn('a', recordingBehavior('a', journal), { supervision: strategy });
  await ref.tell({ op: 'throw', error: new Error('transient') });
  await settle();
  const corruption = Object.assign(new Error('checksum mismatch'), { code: 'SF_ERR_STORE_CORRUPTION' });
  await ref.tell({ op: 'throw', error: corruption });
  await settle();
  assert.deepEqual(journal, ['a:start#1', 'a:stop#1', 'a:start#2', 'a:stop#2']);
  assert.equal(system.lookup('/a'), undefined);
  await system.terminate();
});

test('a start() failure with resume is treated as stop (no state to resume), as in Pekko', async () => {
  const { journal, system } = setup();
  system.spawn('a', recordingBehavior('a', journal, { failStart: () => new Error('cannot open') }), {
    supervision: SupervisorStrategy.resume,
  });
  await settle();
  assert.deepEqual(journal, ['a:start-failed#1']);
  assert.equal(system.lookup('/a'), undefined);
  await system.terminate();
});
