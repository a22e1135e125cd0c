import assert from 'node:assert/strict';
import { request } from 'node:http';
import { test } from 'node:test';
import { ActorSystem } from '../src/runtime/actor/index.js';
import { listenInspection, startInspectionServer } from '../src/runtime/inspection/server.js';
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
    const notFound = await fetch(`${server.url}/nope`);
    assert.equal(notFound.status, 404);
    assert.deepEqual(((await notFound.json()) as { paths: string[] }).paths, ['/', '/tree', '/tree.txt', '/events', '/metrics']);
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

/** GET `path` from `url` with a chosen `Host` header (fetch does not let one set it). */
function getWithHost(url: string, path: string, host: string): Promise<number | undefined> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    request({ host: hostname, port, path, headers: { host } }, (response) => {
      response.resume();
      resolve(response.statusCode);
    }).once('error', reject).end();
  });
}

test('the console page and its assets are served with a strict content security policy', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  const server = await startInspectionServer(system);
  try {
    const page = await fetch(`${server.url}/`);
    assert.equal(page.status, 200);
    assert.equal(page.headers.get('content-type'), 'text/html; charset=utf-8');
    assert.match(page.headers.get('content-security-policy') ?? '', /script-src 'self';/);
    const html = await page.text();
    assert.match(html, /<script src="\/page\.js" defer><\/script>/);
    assert.match(html, /<link rel="stylesheet" href="\/page\.css">/);
    const script = await fetch(`${server.url}/page.js`);
    assert.equal(script.headers.get('content-type'), 'text/javascript; charset=utf-8');
    assert.match(await script.text(), /new EventSource\('\/events'\)/);
    assert.equal((await fetch(`${server.url}/page.css`)).headers.get('content-type'), 'text/css; charset=utf-8');
  } finally {
    await server.close();
    await system.terminate();
  }
});

test('a loopback endpoint refuses requests whose Host header is not a loopback name (DNS rebinding)', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  const server = await startInspectionServer(system);
  try {
    assert.equal(await getWithHost(server.url, '/tree', 'attacker.example'), 403);
    assert.equal(await getWithHost(server.url, '/', 'attacker.example:80'), 403);
    assert.equal(await getWithHost(server.url, '/tree', '127.0.0.1'), 200);
    assert.equal(await getWithHost(server.url, '/tree', 'localhost:9464'), 200);
    assert.equal(await getWithHost(server.url, '/tree', '[::1]:9464'), 200);
  } finally {
    await server.close();
    await system.terminate();
  }
});

test('HEAD /events answers headers only; open streams get keep-alive comments', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  const server = await startInspectionServer(system, { heartbeatMs: 20 });
  try {
    const head = await fetch(`${server.url}/events`, { method: 'HEAD' });
    assert.equal(head.headers.get('content-type'), 'text/event-stream; charset=utf-8');
    const events = await fetch(`${server.url}/events`);
    const reader = events.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    while (!text.includes(': keep-alive\n\n')) {
      const { value, done } = await reader.read();
      assert.equal(done, false, `stream ended early: ${text}`);
      text += decoder.decode(value, { stream: true });
    }
    assert.match(text, /^: shardflow lifecycle events\nretry: 2000\n\n/);
    await reader.cancel();
  } finally {
    await server.close();
    await system.terminate();
  }
  await assert.rejects(startInspectionServer(system, { heartbeatMs: 0 }), { code: 'SF_ERR_INVALID_ARGUMENT' });
});

test('an endpoint can listen before its system exists: 503 until attach, then the system; one attach only', async () => {
  const endpoint = await listenInspection();
  const system = ActorSystem.create({ name: 'late', clock: new ManualClock(), logger: recordingLogger() });
  try {
    for (const path of ['/tree', '/tree.txt', '/events', '/metrics']) {
      const response = await fetch(`${endpoint.url}${path}`);
      assert.equal(response.status, 503, path);
      assert.equal(response.headers.get('retry-after'), '1');
      await response.body?.cancel();
    }
    assert.equal((await fetch(`${endpoint.url}/`)).status, 200, 'the page loads and waits');
    assert.equal((await fetch(`${endpoint.url}/nope`)).status, 404);
    endpoint.attach(system);
    assert.equal(((await (await fetch(`${endpoint.url}/tree`)).json()) as { path: string }).path, '/');
    assert.match(await (await fetch(`${endpoint.url}/metrics`)).text(), /^shardflow_actor_restarts_total\{path="\/",kind="guardian"\} 0$/m);
    assert.throws(() => endpoint.attach(system), { code: 'SF_ERR_INVALID_ARGUMENT' });
  } finally {
    await endpoint.close();
    await system.terminate();
  }
  assert.throws(() => endpoint.attach(system), { code: 'SF_ERR_ACTOR_STOPPED' });
});
