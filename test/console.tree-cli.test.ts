import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { renderTreeForTerminal, runTree } from '../src/cli/tree.js';
import { ActorSystem } from '../src/runtime/actor/index.js';
import type { TreeNode } from '../src/runtime/inspection.js';
import { readEventStream } from '../src/runtime/inspection/eventStream.js';
import { startInspectionServer } from '../src/runtime/inspection/server.js';
import { SupervisorStrategy } from '../src/runtime/supervision/index.js';
import { repoRoot } from './kit/datasets.js';
import { recordingBehavior, recordingLogger, settle, type Recording } from './kit/index.js';

const node = (path: string, status: TreeNode['status'], extra: Partial<TreeNode> = {}): TreeNode => ({
  path, kind: 'k', status, mailboxDepth: 0, processed: 0, dropped: 0, restarts: 0, children: [], ...extra,
});

const sample: TreeNode = node('/', 'running', {
  kind: 'guardian',
  children: [
    node('/partitions', 'running', {
      kind: 'supervisor',
      children: [
        node('/partitions/p0/indexer', 'backoff', {
          kind: 'indexer', restarts: 3, mailboxDepth: 7, processed: 42,
          lastError: { name: 'InjectedFaultError', message: 'injected fault', code: 'SF_ERR_INJECTED_FAULT' },
        }),
        node('/partitions/p0/metrics', 'failed', { kind: 'metrics', dropped: 2, lastError: { name: 'Error', message: 'x'.repeat(300) } }),
      ],
    }),
  ],
});

test('the terminal tree shows status, restarts and mailbox per actor, and a header with totals', () => {
  const text = renderTreeForTerminal(sample, { color: false });
  assert.equal(text.split('\n').slice(0, 4).join('\n'), [
    '4 actors: 2 running, 1 backoff, 1 failed; 3 restarts',
    '/ [guardian] running restarts=0 mailbox=0 processed=0',
    '  partitions [supervisor] running restarts=0 mailbox=0 processed=0',
    '    indexer [indexer] backoff restarts=3 mailbox=7 processed=42 SF_ERR_INJECTED_FAULT: injected fault',
  ].join('\n'));
  const last = text.split('\n')[4]!;
  assert.match(last, /^ {4}metrics \[metrics\] failed restarts=0 mailbox=0 processed=0 dropped=2 Error: x+…$/);
  assert.equal(last.length, '    metrics [metrics] failed restarts=0 mailbox=0 processed=0 dropped=2 '.length + 100, 'long errors are cut to 100 characters');
  assert.doesNotMatch(text, /\x1b\[/, 'no ANSI codes without colour');
});

test('--filter keeps matching actors with their ancestors; totals stay over the whole tree', () => {
  const text = renderTreeForTerminal(sample, { color: false, filter: 'metrics' });
  assert.deepEqual(text.split('\n').map((line) => line.replace(/ restarts=.*/, '')), [
    '4 actors: 2 running, 1 backoff, 1 failed; 3 restarts; 3 shown for "metrics"',
    '/ [guardian] running',
    '  partitions [supervisor] running',
    '    metrics [metrics] failed',
  ]);
});

test('with colour, states and non-zero restarts are coloured', () => {
  const text = renderTreeForTerminal(sample, { color: true, source: 'http://127.0.0.1:9464' });
  const green = '\x1b[32m', yellow = '\x1b[33m', red = '\x1b[31m';
  assert.ok(text.split('\n')[0]!.includes('http://127.0.0.1:9464'));
  assert.ok(text.includes(`${green}running\x1b[39m`), 'running in green');
  assert.ok(text.includes(`${yellow}backoff\x1b[39m`), 'backoff in yellow');
  assert.ok(text.includes(`${red}failed\x1b[39m`), 'failed in red');
  assert.ok(text.includes(`${yellow}restarts=3\x1b[39m`), 'restarts > 0 in yellow');
  assert.ok(text.includes(' restarts=0 '), 'restarts = 0 uncoloured');
});

test('with a width, every line fits it by visible characters, colours kept', () => {
  const text = renderTreeForTerminal(sample, { color: true, width: 60 });
  const visible = text.split('\n').map((line) => line.replace(/\x1b\[\d+m/g, ''));
  assert.ok(visible.every((line) => line.length <= 60), visible.join('\n'));
  assert.equal(visible[3], '    indexer [indexer] backoff restarts=3 mailbox=7 processe…');
  assert.equal(visible[3]!.length, 60);
  assert.ok(text.split('\n')[3]!.includes('\x1b[33mbackoff\x1b[39m'));
  assert.equal(renderTreeForTerminal(sample, { color: false, width: 500 }), renderTreeForTerminal(sample, { color: false }), 'short lines unchanged');
});

test('the event-stream parser handles comments, multi-line data, CRLF and chunks split anywhere', async () => {
  const wire = ': hello\r\nretry: 2000\r\n\r\nevent: a\r\ndata: {"x":1}\r\n\r\ndata: line1\ndata: line2\n\nevent: only-name\n\nevent: b\rdata:no-space\r\r';
  const bytes = new TextEncoder().encode(wire);
  for (const size of [1, 2, 3, 7, bytes.length]) {
    async function* chunks(): AsyncGenerator<Uint8Array> {
      for (let i = 0; i < bytes.length; i += size) yield bytes.slice(i, i + size);
    }
    const events = [];
    for await (const e of readEventStream(chunks())) events.push(e);
    assert.deepEqual(events, [
      { event: 'a', data: '{"x":1}' },
      { event: 'message', data: 'line1\nline2' },
      { event: 'b', data: 'no-space' },
    ], `chunk size ${size}`);
  }
});

/** A system with `/sup/w` (a recorder) and an endpoint on an ephemeral port. */
async function liveSystem() {
  const system = ActorSystem.create({ name: 'test', logger: recordingLogger() });
  system.supervise('sup', SupervisorStrategy.oneForOne(), [{ name: 'w', behavior: recordingBehavior('w', [], { kind: 'worker' }) }]);
  await settle();
  const server = await startInspectionServer(system);
  return { system, server, worker: system.lookup<Recording>('/sup/w')! };
}

test('runTree prints the live tree once', async () => {
  const { system, server } = await liveSystem();
  try {
    let out = '';
    const outcome = await runTree({ url: `${server.url}/`, watch: false, intervalMs: 1000, color: false, write: (t) => (out += t), now: () => 0 });
    assert.equal(outcome, 'printed');
    assert.match(out, /^http:\/\/127\.0\.0\.1:\d+ {2}3 actors: 3 running; 0 restarts/);
    assert.match(out, /\n {4}w \[worker\] running restarts=0 mailbox=0 processed=0\n$/);
  } finally {
    await server.close();
    await system.terminate();
  }
});

test('runTree --watch cuts a frame taller than the terminal and says how much is left out', async () => {
  const { system, server } = await liveSystem();
  const abort = new AbortController();
  let out = '';
  try {
    const watching = runTree({ url: server.url, watch: true, intervalMs: 60_000, color: false, write: (t) => (out += t), signal: abort.signal, maxLines: 3, terminal: true });
    while (!out.includes('\x1b[J')) await new Promise((r) => setTimeout(r, 10));
    abort.abort();
    assert.equal(await watching, 'aborted');
    const lines = out.split('\x1b[J')[0]!.split('\n').filter((l) => l !== '');
    assert.equal(lines.length, 3);
    assert.match(lines[1]!, /^\/ \[guardian\]/);
    assert.equal(lines[2], '… 2 more lines: a taller terminal or --filter <text> shows them\x1b[K');
  } finally {
    abort.abort();
    await server.close();
    await system.terminate();
  }
});

test('runTree --watch redraws when an actor restarts, and ends with the stream or on abort', async () => {
  const { system, server, worker } = await liveSystem();
  const abort = new AbortController();
  let out = '';
  const frames = (): string[] => out.split('\x1b[H').filter((f) => f !== '');
  try {
    const watching = runTree({ url: server.url, watch: true, intervalMs: 60_000, color: false, write: (t) => (out += t), signal: abort.signal, terminal: true });
    while (frames().length < 1) await new Promise((r) => setTimeout(r, 10));
    assert.match(frames()[0]!, /w \[worker\] running restarts=0/);
    await new Promise((r) => setTimeout(r, 100)); // let the SSE stream connect
    await worker.tell({ op: 'throw', error: new Error('crash') });
    const deadline = Date.now() + 5000;
    while (!/w \[worker\] running restarts=1 mailbox=0 processed=0 Error: crash\x1b\[K\n/.test(out)) {
      assert.ok(Date.now() < deadline, `no redraw with restarts=1 (the interval is 60 s, so only an event can cause it):\n${out}`);
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.ok(frames().at(-1)!.endsWith('\x1b[K\n\x1b[J'), 'a frame erases what is left below it');
    abort.abort();
    assert.equal(await watching, 'aborted');

    const again = runTree({ url: server.url, watch: true, intervalMs: 60_000, color: false, write: () => undefined });
    await new Promise((r) => setTimeout(r, 100));
    await system.terminate();
    assert.equal(await again, 'stream-ended');
  } finally {
    abort.abort();
    await server.close();
    await system.terminate();
  }
});

test('runTree --watch into a non-terminal prints plain frames one after another, uncut, with no control codes', async () => {
  const { system, server } = await liveSystem();
  const abort = new AbortController();
  let out = '';
  const headers = (): number => out.match(/^http:\/\/127\.0\.0\.1:\d+ {2}3 actors: /gm)?.length ?? 0;
  try {
    // maxLines and width are for an in-place redraw on a terminal: ignored here.
    const watching = runTree({ url: server.url, watch: true, intervalMs: 30, color: false, write: (t) => (out += t), signal: abort.signal, maxLines: 3, width: 30, terminal: false });
    const deadline = Date.now() + 5000;
    while (headers() < 2) {
      assert.ok(Date.now() < deadline, `fewer than two frames:\n${out}`);
      await new Promise((r) => setTimeout(r, 10));
    }
    abort.abort();
    assert.equal(await watching, 'aborted');
    assert.ok(!out.includes('\x1b'), JSON.stringify(out));
    const frames = out.split('\n\n');
    assert.ok(frames.length >= 2);
    for (const frame of frames) {
      assert.match(frame, /^http:\/\/127\.0\.0\.1:\d+ {2}3 actors: 3 running; 0 restarts {2}\S/, 'a header line with the time');
      assert.match(frame, /\n {4}w \[worker\] running restarts=0 mailbox=0 processed=0\n?$/, 'uncut');
    }
  } finally {
    abort.abort();
    await server.close();
    await system.terminate();
  }
});

/** Runs `shardflow tree --url URL --watch ...args` with stdout a pipe until it has printed two frames, then Ctrl-C; @returns its stdout and exit code. */
async function watchIntoPipe(url: string, args: readonly string[], env: NodeJS.ProcessEnv): Promise<{ stdout: string; code: number | null }> {
  const child = spawn(process.execPath, [join(repoRoot, 'bin/shardflow.mjs'), 'tree', '--url', url, '--watch', '--interval', '50', ...args], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  let stdout = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (text: string) => {
    stdout += text;
    if ((stdout.match(/ actors: /g)?.length ?? 0) >= 2) child.kill('SIGINT');
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  try {
    return { code: await exited, stdout };
  } finally {
    clearTimeout(timer);
  }
}

test('`shardflow tree --watch` with stdout a pipe prints plain frames: no cursor codes, and no colours with --no-color or without a terminal', async () => {
  const { system, server } = await liveSystem();
  const env: NodeJS.ProcessEnv = { ...process.env, CI: '1' }; // picocolors says colours on CI even into a pipe
  delete env.NO_COLOR;
  delete env.FORCE_COLOR;
  try {
    for (const args of [['--no-color'], []]) {
      const { stdout, code } = await watchIntoPipe(server.url, args, env);
      assert.equal(code, 0, stdout);
      assert.ok(!stdout.includes('\x1b'), `${args.join(' ')}: ${JSON.stringify(stdout)}`);
      const frames = stdout.split('\n\n');
      assert.ok(frames.length >= 2, stdout);
      for (const frame of frames) assert.match(frame, /^http:\/\/127\.0\.0\.1:\d+ {2}3 actors: 3 running; 0 restarts {2}\S[^\n]*\n\/ \[guardian\]/);
    }
  } finally {
    await server.close();
    await system.terminate();
  }
});

test('`shardflow tree --url` prints the tree and exits 0; an unreachable endpoint exits 1 with a message', async () => {
  const run = promisify(execFile);
  const bin = join(repoRoot, 'bin/shardflow.mjs');
  const { system, server } = await liveSystem();
  try {
    const { stdout } = await run(process.execPath, [bin, 'tree', '--url', server.url, '--no-color'], { env: { ...process.env, NO_COLOR: '1' } });
    assert.match(stdout, /\n {2}sup \[supervisor\] running restarts=0 mailbox=0 processed=0\n {4}w \[worker\] running/);
  } finally {
    await server.close();
    await system.terminate();
  }
  await assert.rejects(run(process.execPath, [bin, 'tree', '--url', server.url]), (err: { code?: number; stderr?: string }) => {
    assert.equal(err.code, 1);
    assert.match(err.stderr ?? '', /shardflow tree: cannot read http:\/\/127\.0\.0\.1:\d+: fetch failed \(ECONNREFUSED\)/);
    return true;
  });
  await assert.rejects(run(process.execPath, [bin, 'tree', '--url', 'ftp://x']), (err: { stderr?: string }) => /expected an http:\/\/ or https:\/\/ URL/.test(err.stderr ?? ''));
});
