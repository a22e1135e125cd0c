import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActorSystem, type ActorRef, type Behavior, type Terminated } from '../src/runtime/actor/index.js';
import { SupervisorStrategy } from '../src/runtime/supervision/index.js';
import { ManualClock, recordingBehavior, recordingLogger, settle, type Recording } from './kit/index.js';

type WatcherMessage = { readonly watch: ActorRef<Recording, string> } | Terminated | { readonly gone: string };

function watcher(seen: WatcherMessage[], mode: 'watch' | 'watchWith'): Behavior<WatcherMessage, void, void> {
  return {
    kind: 'watcher',
    start: () => undefined,
    receive: (_state, message, ctx) => {
      if ('watch' in message) {
        if (mode === 'watch') ctx.watch(message.watch, (terminated) => terminated);
        else ctx.watchWith(message.watch, { gone: message.watch.path });
        return;
      }
      seen.push(message);
    },
  };
}

test('watch delivers Terminated to the watcher’s mailbox when the target stops, not when it restarts', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  const target = system.spawn('t', recordingBehavior('t', []), { supervision: SupervisorStrategy.restart });
  const seen: WatcherMessage[] = [];
  const w = system.spawn('w', watcher(seen, 'watch'));
  await w.tell({ watch: target });
  await settle();
  await target.tell({ op: 'throw', error: new Error('restart me') });
  await settle();
  assert.deepEqual(seen, [], 'a restart is not a termination');
  await target.stop();
  await settle();
  assert.deepEqual(seen, [{ type: '@shardflow.terminated', path: '/t', reason: undefined }]);
  await system.terminate();
});

test('Terminated carries the failure when a stop directive ended the target; watchWith sends a fixed message', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  const target = system.spawn('t', recordingBehavior('t', []), { supervision: SupervisorStrategy.stop });
  const other = system.spawn('o', recordingBehavior('o', []));
  const seen: WatcherMessage[] = [];
  const seenWith: WatcherMessage[] = [];
  const w1 = system.spawn('w1', watcher(seen, 'watch'));
  const w2 = system.spawn('w2', watcher(seenWith, 'watchWith'));
  await w1.tell({ watch: target });
  await w2.tell({ watch: other });
  await settle();
  const fatal = new Error('fatal');
  await target.tell({ op: 'throw', error: fatal });
  await other.stop();
  await settle();
  assert.deepEqual(seen, [{ type: '@shardflow.terminated', path: '/t', reason: fatal }]);
  assert.deepEqual(seenWith, [{ gone: '/o' }]);
  await system.terminate();
});

test('watching an already stopped actor notifies at once; cancel and the watcher’s restart end a watch', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  const dead = system.spawn('dead', recordingBehavior('dead', []));
  await dead.stop();
  const calls: string[] = [];
  const targetA = system.spawn('a', recordingBehavior('a', []));
  const targetB = system.spawn('b', recordingBehavior('b', []));
  const w = system.spawn('w', {
    kind: 'watcher',
    start: (ctx) => {
      ctx.watch(dead, (t) => void calls.push(`dead ${t.path}`));
      ctx.watch(targetA, () => void calls.push('a'))(); // cancelled at once
      ctx.watch(targetB, () => void calls.push('b'));
    },
    receive: () => {
      throw new Error('restart the watcher');
    },
  } satisfies Behavior<string, void, void>, { supervision: SupervisorStrategy.restart });
  await settle();
  assert.deepEqual(calls, ['dead /dead']);
  await w.tell('boom'); // restart: incarnation 1's watches end, incarnation 2 watches again
  await settle();
  await targetA.stop();
  await targetB.stop();
  await settle();
  assert.deepEqual(calls, ['dead /dead', 'dead /dead', 'b']);
  await system.terminate();
});
