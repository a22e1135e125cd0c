import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActorSystem, detachReply, type Behavior } from '../src/runtime/actor/index.js';
import { ManualClock, recordingLogger, settle } from './kit/index.js';

/**
 * `detachReply` (Akka's pipeTo): a behaviour answers an ask later while it goes on with its
 * mailbox; a rejected answer rejects that ask only, and the actor is not restarted.
 */
type Msg = { kind: 'slow'; id: number } | { kind: 'fast'; id: number } | { kind: 'bad' };

test('a detached answer lets the next messages run, and reaches its asker when it settles', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  const gates: Array<() => void> = [];
  const handled: string[] = [];
  let starts = 0;
  const behavior: Behavior<Msg, void, string> = {
    kind: 'detaching',
    start: () => void starts++,
    receive: (_s, m) => {
      if (m.kind === 'bad') return detachReply(Promise.reject(new Error('no answer for you')));
      handled.push(`${m.kind}-${m.id}`);
      if (m.kind === 'fast') return `fast-${m.id}`;
      return detachReply(new Promise<string>((resolve) => gates.push(() => resolve(`slow-${m.id}`))));
    },
  };
  const ref = system.spawn('a', behavior);
  const slow = ref.ask({ kind: 'slow', id: 1 });
  let slowAnswer: string | undefined;
  void slow.then((v) => (slowAnswer = v));
  // The fast ones after it are answered while the slow one is still open.
  assert.equal(await ref.ask({ kind: 'fast', id: 2 }), 'fast-2');
  assert.equal(await ref.ask({ kind: 'fast', id: 3 }), 'fast-3');
  await settle();
  assert.equal(slowAnswer, undefined, 'the slow answer is not there yet');
  assert.deepEqual(handled, ['slow-1', 'fast-2', 'fast-3']);
  gates[0]!();
  assert.equal(await slow, 'slow-1');
  // A rejected detached answer rejects its ask, and nothing else: no restart, the mailbox goes on.
  await assert.rejects(ref.ask({ kind: 'bad' }), /no answer for you/);
  assert.equal(await ref.ask({ kind: 'fast', id: 4 }), 'fast-4');
  assert.equal(starts, 1, 'never restarted');
  const node = system.tree().children[0]!;
  assert.equal(node.processed, 5, 'each message counted once, when handed back');
  assert.equal(node.restarts, 0);
  // A tell's detached rejection is dropped (no unhandled rejection, no failure).
  await ref.tell({ kind: 'bad' });
  assert.equal(await ref.ask({ kind: 'fast', id: 5 }), 'fast-5');
  assert.equal(starts, 1);
  await system.terminate();
});

test('an async receive may resolve to a detached answer: the mailbox goes on once it resolved', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const behavior: Behavior<string, void, string> = {
    kind: 'async-detaching',
    start: () => undefined,
    receive: async (_s, m) => (m === 'slow' ? detachReply(opened.then(() => 'slow done')) : `${m} done`),
  };
  const ref = system.spawn('b', behavior);
  const slow = ref.ask('slow');
  assert.equal(await ref.ask('fast'), 'fast done');
  open();
  assert.equal(await slow, 'slow done');
  await system.terminate();
});
