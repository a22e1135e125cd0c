import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Topology, defineNamespace, encodeInt64, int64Add, msgpackCodec, type ClusterClient, type RunningTopology, type StagesOf } from '../src/index.js';

/**
 * The compile-time half of this test is `npm run typecheck` (tsc over test/): each
 * `@ts-expect-error` below must meet an error, or tsc reports the directive as unused. So a
 * stage whose handler expects another type than its input namespace carries, an `emit` of a
 * value of another type than the output namespace's, an undeclared column family or output,
 * and an `ask` with the wrong request type do not compile. The run-time half checks
 * `describe()`.
 */
interface Click { readonly host: string; readonly ms: number }
interface Delta { readonly host: string; readonly delta: number }
const isClick = (v: unknown): v is Click => typeof (v as Click)?.host === 'string';
const isDelta = (v: unknown): v is Delta => typeof (v as Delta)?.host === 'string';
const clicks = defineNamespace('clicks', { codec: msgpackCodec('Click', isClick), partitions: 8, key: (c: Click) => c.host });
const deltas = defineNamespace('deltas', { codec: msgpackCodec('Delta', isDelta), partitions: 2, key: (d: Delta) => d.host });

const typed = Topology.create('types')
  .stage('count', {
    input: clicks,
    outputs: { deltas },
    columnFamilies: { hosts: { mergeOperator: int64Add() } },
    onMessage(ctx, click) {
      ctx.writes.merge('hosts', click.host, encodeInt64(1));
      ctx.emit('deltas', { host: click.host, delta: 1 });
      // @ts-expect-error a Click is not a Delta: the output namespace's type is checked
      ctx.emit('deltas', click);
      // @ts-expect-error 'pages' is not a declared column family
      ctx.writes.put('pages', click.host, new Uint8Array());
      // @ts-expect-error 'other' is not an output of this stage
      ctx.emit('other', { host: click.host, delta: 1 });
    },
    query: async (reads, host: string) => (await reads.get('hosts', host))?.length ?? 0,
  })
  .stage('totals', {
    input: deltas,
    // The next stage's input type is the previous stage's output type: Delta.
    onMessage: (_ctx, d) => void (d.delta satisfies number),
  });

// A handler of Clicks on a stage reading `deltas`: tsc reports the input namespace
// (NamespaceDef<Delta> is not a NamespaceDef<Click>).
Topology.create('mismatch').stage('totals', {
  // @ts-expect-error a stage reading `deltas` cannot take Clicks
  input: deltas,
  onMessage: (_ctx, _c: Click) => {},
});

Topology.create('mismatch-batch').stage('totals', {
  // @ts-expect-error nor batches of Clicks
  input: deltas,
  onBatch: (_ctx, _cs: readonly Click[]) => {},
});

// Stage output feeding the next stage: `count` emits Deltas, so a stage reading its output
// namespace with a Click handler does not compile.
Topology.create('chain')
  .stage('count', { input: clicks, outputs: { deltas }, onMessage: (ctx, c) => ctx.emit('deltas', { host: c.host, delta: 1 }) })
  .stage('totals', {
    // @ts-expect-error the output type of `count` (Delta) is the input type of `totals`
    input: deltas,
    onMessage: (_ctx, _c: Click) => {},
  });

// Asks are typed by the stage's query hook.
export async function asks(running: RunningTopology<typeof typed extends Topology<infer S> ? S : never>): Promise<number> {
  const n: number = await running.ask('count', 0, 'h.example');
  // @ts-expect-error the query of `count` takes a host string
  await running.ask('count', 0, 42);
  // @ts-expect-error there is no stage `nope`
  await running.ask('nope', 0, 'x');
  return n;
}

// A cluster client is typed the same way when given the topology's stages (found by a new
// user: its asks took any stage name and answered `unknown`).
export async function clusterAsks(client: ClusterClient<StagesOf<typeof typed>>, untyped: ClusterClient): Promise<number> {
  const n: number = await client.askKey('count', 'h.example', 'h.example');
  const all: number[] = await client.askAll('count', 'h.example');
  // @ts-expect-error the query of `count` takes a host string
  await client.ask('count', 0, 42);
  // @ts-expect-error there is no stage `nope`
  await client.askKey('nope', 'k', 'x');
  // @ts-expect-error its answer is a number
  const s: string = await client.ask('count', 0, 'h.example');
  // Without the type parameter: any stage, unknown answers.
  const u: unknown = await untyped.ask('anything', 0, { any: 'request' });
  return n + all.length + s.length + (u === undefined ? 0 : 1);
}

test('describe() shows the namespaces, stages, stores and actors of a topology', () => {
  const text = typed.describe();
  assert.match(text, /^topology types$/m);
  assert.match(text, /clicks: 8 partitions \(fnv1a\/8\), from producers, read by count/);
  assert.match(text, /deltas: 2 partitions \(fnv1a\/2\), from count, read by totals/);
  assert.match(text, /count: clicks -> deltas/);
  assert.match(text, /store: hosts \(shardflow\.int64_add\.v1\) \+ sf\.meta, sf\.outbox/);
  assert.match(text, /actors: \/count\/p0 \.\. \/count\/p7/);
});

test('a namespace name defined twice, a duplicate stage and a reserved column family are refused', () => {
  const other = defineNamespace('clicks', { codec: msgpackCodec('Click', isClick), partitions: 4, key: (c: Click) => c.host });
  assert.throws(() => typed.stage('again', { input: other }), /namespace clicks is defined twice/);
  assert.throws(() => typed.stage('count', { input: clicks }), /stage count is declared twice/);
  // Refused when declared, naming what is wrong (found by a new user: a stage name with a space
  // was "an actor name", and a reserved family was refused only at start()).
  assert.throws(() => typed.stage('bad name', { input: clicks }), /topology types: stage name must be 1-200 characters without '\/' or whitespace.*"bad name"/);
  for (const dots of ['.', '..']) assert.throws(() => typed.stage(dots, { input: clicks }), /not '\.' or '\.\.'/);
  assert.throws(() => typed.stage('other', { input: clicks, columnFamilies: { '': {} } }), /topology types: stage other: a column family name is empty/);
  assert.throws(() => Topology.create('my app'), /topology name must be/);
  assert.throws(() => typed.stage('other', { input: clicks, columnFamilies: { 'sf.x': {} } }), /topology types: stage other: column family "sf\.x" is reserved/);
  assert.throws(() => defineNamespace('Bad Name', { codec: msgpackCodec('Click', isClick), partitions: 1, key: () => '' }), /namespace "Bad Name"/);
});
