import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActorSystem } from '../src/runtime/actor/index.js';
import { startInspectionServer } from '../src/runtime/inspection/server.js';
import { SupervisorStrategy } from '../src/runtime/supervision/index.js';
import { ManualClock, recordingBehavior, recordingLogger, settle } from './kit/index.js';

test('the inspection endpoint serves the tree as JSON and text, and lifecycle events as SSE', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  system.supervise('sup', SupervisorStrategy.oneForOne(), [{ name: 'w', behavior: recordingBehavior('w', []) }]);
  await settle();
  const server = await startInspectionServer(system);
  try {
    assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    const tree = (await (await fetch(`${server.url}/tree`)).json()) as { path: string; children: { path: string; children: { status: string }[] }[] };
    assert.equal(tree.path, '/');
    assert.equal(tree.children[0]?.path, '/sup');
    assert.equal(tree.children[0]?.children[0]?.status, 'running');
    assert.equal(await (await fetch(`${server.url}/tree.txt`)).text(), `${system.renderTree()}\n`);
    assert.equal((await fetch(`${server.url}/nope`)).status, 404);
    assert.equal((await fetch(`${server.url}/tree`, { method: 'POST' })).status, 405);

    const events = await fetch(`${server.url}/events`);
    assert.equal(events.headers.get('content-type'), 'text/event-stream; charset=utf-8');
    const text = events.text(); // ends when the system terminates
    await settle();
    const boom = Object.assign(new Error('flaky'), { code: 'SF_ERR_BROKER_DISCONNECTED' });
    await system.lookup('/sup/w')?.tell({ op: 'throw', error: boom });
    await settle();
    await system.terminate();
    const body = await text;
    assert.match(body, /event: @shardflow\.failed\ndata: \{"type":"@shardflow\.failed","path":"\/sup\/w","kind":"recorder","reason":\{"name":"Error","message":"flaky","code":"SF_ERR_BROKER_DISCONNECTED"\},"at":0\}/);
    assert.match(body, /event: @shardflow\.restarted\n/);
    assert.match(body, /event: @shardflow\.stopped\ndata: \{"type":"@shardflow\.stopped","path":"\/"/);
  } finally {
    await server.close();
    await server.close();
  }
});

test('a bad port is rejected', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  await assert.rejects(startInspectionServer(system, { port: 70000 }), { code: 'SF_ERR_INVALID_ARGUMENT' });
  await system.terminate();
});
