import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Packr } from 'msgpackr';
import { UndecodableMessageError } from '../src/errors.js';
import { contributionCodec, type CopyRuns } from '../src/actors/messages.js';
import { packedKey, packKeys } from '../src/storage/index.js';

// `metrics/<q>` messages carry packed keys and a float64 array; bad ones must be refused
// with UndecodableMessageError (their consumer dead-letters them with the reason).
const packr = new Packr({ useRecords: false });

describe('metrics/<q> contribution codec', () => {
  it('round-trips keys and deltas exactly, unaligned on the wire', () => {
    const urls = ['http://a.example/', 'http://b.example/x?y', 'http://ü.example/ß', ''];
    const deltas = Float64Array.of(0.1, -2.5e-300, 1 / 3, 0);
    const bytes = contributionCodec.encode({ type: 'metrics', round: 7, keys: packKeys(urls.map((u) => Buffer.from(u))), deltas });
    // Decode from an odd offset, as a broker frame may hand it over.
    const shifted = new Uint8Array(bytes.length + 1);
    shifted.set(bytes, 1);
    const back = contributionCodec.decode(shifted.subarray(1));
    assert.equal(back.round, 7);
    assert.deepEqual([...back.deltas], [...deltas]);
    assert.deepEqual(urls.map((_, i) => Buffer.from(packedKey(back.keys, i)).toString()), urls);
    assert.equal(back.source, undefined);
    const withSource = contributionCodec.decode(
      contributionCodec.encode({ type: 'metrics', round: 8, keys: back.keys, deltas, source: { dictionary: 'd-1', indexes: Uint32Array.of(4, 0, 7, 2 ** 32 - 1) } }),
    );
    assert.deepEqual(withSource.source, { dictionary: 'd-1', indexes: Uint32Array.of(4, 0, 7, 2 ** 32 - 1) });
    assert.equal(withSource.copies, undefined);
    // Copies of source metrics for backlinks, in runs (a source, its x, its targets), alone or with contributions.
    const sources = ['http://s.example/', 'http://s.example/ß'];
    const targets = ['http://t.example/', 'http://ü.example/', 'http://t.example/2'];
    const copies = { sources: packKeys(sources.map((k) => Buffer.from(k))), values: Float64Array.of(0.15, 7.25e-3), runs: Uint32Array.of(2, 1), targets: packKeys(targets.map((k) => Buffer.from(k))) };
    for (const value of [
      { type: 'metrics' as const, round: 9, keys: packKeys([]), deltas: new Float64Array(0), copies },
      { type: 'metrics' as const, round: 9, keys: back.keys, deltas, copies },
    ]) {
      const decoded = contributionCodec.decode(contributionCodec.encode(value));
      assert.deepEqual(copyPairs(decoded.copies!), [
        ['http://t.example/', 'http://s.example/', 0.15],
        ['http://ü.example/', 'http://s.example/', 0.15],
        ['http://t.example/2', 'http://s.example/ß', 7.25e-3],
      ]);
      assert.equal(decoded.deltas.length, value.deltas.length);
    }
    // The form written before runs (one backlink key `target 0x00 source` per copy) still decodes, as runs of one.
    const legacyKeys = ['http://t.example/\u0000http://s.example/', 'http://ü.example/\u0000http://s.example/ß'];
    const legacy = packKeys(legacyKeys.map((k) => Buffer.from(k)));
    const old = contributionCodec.decode(
      packr.pack({ type: 'metrics', round: 9, keyBytes: Buffer.alloc(0), keyEnds: Buffer.alloc(0), deltas: Buffer.alloc(0), copyKeyBytes: legacy.bytes, copyKeyEnds: Buffer.from(legacy.ends.buffer), copyValues: Buffer.from(Float64Array.of(0.15, 7.25e-3).buffer) }),
    );
    assert.deepEqual(copyPairs(old.copies!), [
      ['http://t.example/', 'http://s.example/', 0.15],
      ['http://ü.example/', 'http://s.example/ß', 7.25e-3],
    ]);
    // Re-encoded (keys picked out with starts), it travels as runs.
    assert.deepEqual(copyPairs(contributionCodec.decode(contributionCodec.encode(old)).copies!), copyPairs(old.copies!));
    // Keys picked out of one buffer (as from a KeyArena): a target named by several runs travels once.
    const arena = Buffer.from('..http://t.example/..http://s.example/..http://s.example/ß..http://u.example/');
    const at = (key: string) => [arena.indexOf(key), arena.indexOf(key) + Buffer.byteLength(key)] as const;
    const pick = (keys: string[]) => ({ bytes: arena, starts: Uint32Array.from(keys.map((k) => at(k)[0])), ends: Uint32Array.from(keys.map((k) => at(k)[1])) });
    const picked = {
      sources: pick(['http://s.example/', 'http://s.example/ß']),
      values: Float64Array.of(0.5, 0.25),
      runs: Uint32Array.of(2, 2),
      targets: pick(['http://t.example/', 'http://u.example/', 'http://u.example/', 'http://t.example/']),
    };
    const encoded = contributionCodec.encode({ type: 'metrics', round: 9, keys: packKeys([]), deltas: new Float64Array(0), copies: picked });
    const raw = packr.unpack(encoded) as { copyTargetBytes: Uint8Array };
    assert.equal(Buffer.from(raw.copyTargetBytes).toString(), 'http://t.example/http://u.example/');
    assert.deepEqual(copyPairs(contributionCodec.decode(encoded).copies!), [
      ['http://t.example/', 'http://s.example/', 0.5],
      ['http://u.example/', 'http://s.example/', 0.5],
      ['http://u.example/', 'http://s.example/ß', 0.25],
      ['http://t.example/', 'http://s.example/ß', 0.25],
    ]);
  });

  it('refuses bytes that are not msgpack, a wrong shape, lengths that differ and offsets out of range', () => {
    const wire = (over: Record<string, unknown>) =>
      packr.pack({ type: 'metrics', round: 1, keyBytes: Buffer.from('ab'), keyEnds: Buffer.from(Uint32Array.of(1, 2).buffer), deltas: Buffer.from(Float64Array.of(1, 2).buffer), ...over });
    const runsWire = { copySourceBytes: Buffer.from('s'), copySourceEnds: Buffer.from(Uint32Array.of(1).buffer), copyValues: Buffer.from(Float64Array.of(1).buffer), copyRuns: Buffer.from(Uint32Array.of(2).buffer), copyTargetBytes: Buffer.from('tu'), copyTargetEnds: Buffer.from(Uint32Array.of(1, 2).buffer), copyTargetIndexes: Buffer.from(Uint32Array.of(0, 1).buffer) };
    assert.doesNotThrow(() => contributionCodec.decode(wire({})));
    assert.deepEqual(copyPairs(contributionCodec.decode(wire(runsWire)).copies!), [['t', 's', 1], ['u', 's', 1]]);
    for (const [what, bytes] of [
      ['garbage', Buffer.from([0xc1, 0xff, 0x00])],
      ['keys as an array', wire({ keyBytes: ['a', 'b'] })],
      ['deltas not whole float64s', wire({ deltas: Buffer.alloc(12) })],
      ['lengths differ', wire({ deltas: Buffer.from(Float64Array.of(1).buffer) })],
      ['decreasing ends', wire({ keyEnds: Buffer.from(Uint32Array.of(2, 1).buffer) })],
      ['ends past the bytes', wire({ keyEnds: Buffer.from(Uint32Array.of(1, 3).buffer) })],
      ['indexes without a dictionary', wire({ indexes: Buffer.from(Uint32Array.of(0, 1).buffer) })],
      ['indexes of another length', wire({ dictionary: 'd', indexes: Buffer.from(Uint32Array.of(0).buffer) })],
      ['copy keys without values', wire({ copyKeyBytes: Buffer.from('ab'), copyKeyEnds: Buffer.from(Uint32Array.of(2).buffer) })],
      ['a copy key without 0x00', wire({ copyKeyBytes: Buffer.from('ab'), copyKeyEnds: Buffer.from(Uint32Array.of(2).buffer), copyValues: Buffer.from(Float64Array.of(1).buffer) })],
      ['copy values alone', wire({ copyValues: Buffer.from(Float64Array.of(1).buffer) })],
      ['copy runs without targets', wire({ copySourceBytes: Buffer.from('s'), copySourceEnds: Buffer.from(Uint32Array.of(1).buffer), copyValues: Buffer.from(Float64Array.of(1).buffer), copyRuns: Buffer.from(Uint32Array.of(1).buffer) })],
      ['copy runs that do not sum to the targets', wire({ ...runsWire, copyRuns: Buffer.from(Uint32Array.of(3).buffer) })],
      ['copy runs of another length', wire({ ...runsWire, copyRuns: Buffer.from(Uint32Array.of(1, 1).buffer) })],
      ['copy target ends past the bytes', wire({ ...runsWire, copyTargetEnds: Buffer.from(Uint32Array.of(1, 3).buffer) })],
      ['a copy naming a target out of range', wire({ ...runsWire, copyTargetIndexes: Buffer.from(Uint32Array.of(0, 2).buffer) })],
      ['copy runs without target indexes', wire({ ...runsWire, copyTargetIndexes: undefined })],
      ['both copy forms', wire({ ...runsWire, copyKeyBytes: Buffer.from('a\u0000b'), copyKeyEnds: Buffer.from(Uint32Array.of(3).buffer) })],
      ['copy values of another length', wire({ copyKeyBytes: Buffer.from('ab'), copyKeyEnds: Buffer.from(Uint32Array.of(2).buffer), copyValues: Buffer.from(Float64Array.of(1, 2).buffer) })],
      ['copy ends past the bytes', wire({ copyKeyBytes: Buffer.from('ab'), copyKeyEnds: Buffer.from(Uint32Array.of(3).buffer), copyValues: Buffer.from(Float64Array.of(1).buffer) })],
    ] as const) {
      assert.throws(() => contributionCodec.decode(bytes), UndecodableMessageError, what);
    }
  });
});

/** [target, source, x] of each copy of `copies`, run by run. */
function copyPairs(copies: CopyRuns): Array<[string, string, number]> {
  const out: Array<[string, string, number]> = [];
  let t = 0;
  for (let j = 0; j < copies.runs.length; j++) {
    const source = Buffer.from(packedKey(copies.sources, j)).toString();
    for (let k = 0; k < copies.runs[j]!; k++) out.push([Buffer.from(packedKey(copies.targets, t++)).toString(), source, copies.values[j]!]);
  }
  return out;
}

describe('msgpack codecs', () => {
  it('read plain msgpack maps from other producers as well as their own records', async () => {
    const { linkOpCodec } = await import('../src/actors/messages.js');
    const value = { type: 'links' as const, ops: [{ op: 'remove' as const, source: 'http://a/', target: 'http://b/' }] };
    assert.deepEqual(linkOpCodec.decode(packr.pack(value)), value);
    assert.deepEqual(linkOpCodec.decode(linkOpCodec.encode(value)), value);
  });
});

describe('fetches/<p> and links/<q> codecs (features table on the wire)', () => {
  const body = { anchor: '', position: 0, rel: [], sameHost: true, region: 'body' as const };
  const nav = { anchor: 'home', position: 0.5, rel: ['nofollow'], sameHost: false, region: 'nav' as const, repeats: [{ anchor: 'x', position: 0.9, rel: [], region: 'footer' as const }] };

  it('round-trip fetch results and link operations, each features object sent once and shared again', async () => {
    const { fetchCodec, linkOpCodec } = await import('../src/actors/messages.js');
    const fetches = {
      type: 'fetches' as const,
      results: [
        { url: 'http://a/', status: 200, fetchedAt: 1, outlinks: [{ target: 'http://a/1', features: body }, { target: 'http://b/', features: nav }, { target: 'http://a/2', features: body }] },
        { url: 'http://c/', status: 404, fetchedAt: 2, error: 'gone' },
        { url: 'http://d/', status: 200, fetchedAt: 3, outlinks: [] },
      ],
    };
    const decoded = fetchCodec.decode(fetchCodec.encode(fetches));
    assert.deepEqual(decoded, fetches);
    const links = decoded.results[0]!.outlinks!;
    assert.equal(links[0]!.features, links[2]!.features, 'one object for the links that shared one');
    const ops = {
      type: 'links' as const,
      ops: [
        { op: 'add' as const, source: 'http://a/', target: 'http://a/1', features: body },
        { op: 'remove' as const, source: 'http://a/', target: 'http://x/' },
        { op: 'update' as const, source: 'http://e/', target: 'http://b/', features: nav },
        { op: 'add' as const, source: 'http://a/', target: 'http://a/2', features: body },
      ],
    };
    const back = linkOpCodec.decode(linkOpCodec.encode(ops));
    assert.deepEqual(back, ops);
    const [first, , , last] = back.ops as Array<{ features?: object }>;
    assert.equal(first!.features, last!.features);
  });

  it('write the URL columns joined by 0x00, and arrays when a URL holds one (both round-trip)', async () => {
    const { fetchCodec, linkOpCodec } = await import('../src/actors/messages.js');
    const fetches = (target: string) => ({ type: 'fetches' as const, results: [
      { url: 'http://a/', status: 200, fetchedAt: 1, outlinks: [{ target, features: body }, { target: 'http://b/', features: nav }] },
      { url: 'http://c/', status: 200, fetchedAt: 2, outlinks: [] },
      { url: 'http://d/', status: 0, fetchedAt: 3, error: 'refused' },
      { url: 'http://e/', status: 200, fetchedAt: 4, outlinks: [{ target: '', features: body }] },
    ] });
    const ops = (target: string) => ({ type: 'links' as const, ops: [
      { op: 'add' as const, source: 'http://a/', target, features: body },
      { op: 'remove' as const, source: 'http://a/', target: 'http://x/' },
      { op: 'update' as const, source: 'http://e/', target: 'http://b/', features: nav },
    ] });
    for (const [target, form] of [['http://a/1', 'joined'], ['http://a/\u0000z', 'arrays']] as const) {
      const f = packr.unpack(fetchCodec.encode(fetches(target))) as Record<string, unknown>;
      assert.equal(typeof f.targetsJoined === 'string', form === 'joined', `fetches in the ${form} form`);
      assert.deepEqual(fetchCodec.decode(fetchCodec.encode(fetches(target))), fetches(target));
      const l = packr.unpack(linkOpCodec.encode(ops(target))) as Record<string, unknown>;
      assert.equal(typeof l.targetsJoined === 'string', form === 'joined', `links in the ${form} form`);
      assert.deepEqual(linkOpCodec.decode(linkOpCodec.encode(ops(target))), ops(target));
    }
    assert.deepEqual(linkOpCodec.decode(linkOpCodec.encode({ type: 'links', ops: [] })), { type: 'links', ops: [] });
    assert.deepEqual(fetchCodec.decode(fetchCodec.encode({ type: 'fetches', results: [] })), { type: 'fetches', results: [] });
  });

  it('refuse joined columns that disagree with their counts (UndecodableMessageError)', async () => {
    const { fetchCodec, linkOpCodec } = await import('../src/actors/messages.js');
    const u32 = (...v: number[]) => Buffer.from(Uint32Array.from(v).buffer);
    const i32 = (...v: number[]) => Buffer.from(Int32Array.from(v).buffer);
    const links = (v: object) => packr.pack({ type: 'links', kindBytes: Uint8Array.of(0, 2), sourcesJoined: 'http://a/', sourceRuns: u32(2), targetsJoined: 'http://b/\u0000http://c/', features: [body], featureOfBytes: i32(0, -1), ...v });
    assert.deepEqual(linkOpCodec.decode(links({})).ops, [{ op: 'add', source: 'http://a/', target: 'http://b/', features: body }, { op: 'remove', source: 'http://a/', target: 'http://c/' }]);
    for (const [what, bytes] of [
      ['one target too few', links({ targetsJoined: 'http://b/' })],
      ['runs that sum past the operations', links({ sourceRuns: u32(3) })],
      ['runs that sum short of them', links({ sourceRuns: u32(1) })],
      ['more runs than sources', links({ sourceRuns: u32(1, 1) })],
      ['an unknown kind', links({ kindBytes: Uint8Array.of(0, 9) })],
      ['a feature index out of range', links({ featureOfBytes: i32(4, -1) })],
      ['feature indexes of another length', links({ featureOfBytes: i32(0) })],
      ['a column not of whole values', links({ sourceRuns: Uint8Array.of(2, 0, 0) })],
    ] as const) {
      assert.throws(() => linkOpCodec.decode(bytes), UndecodableMessageError, what);
    }
    const fetches = (v: object, r: object = {}) => packr.pack({ type: 'fetches', features: [body], targetsJoined: 'http://b/\u0000http://c/', featureOfBytes: u32(0, 0), results: [{ url: 'http://a/', status: 200, fetchedAt: 1, outlinkCount: 2, ...r }], ...v });
    assert.equal(fetchCodec.decode(fetches({})).results[0]!.outlinks!.length, 2);
    for (const [what, bytes] of [
      ['a count above the targets', fetches({}, { outlinkCount: 3 })],
      ['a count that is not one', fetches({}, { outlinkCount: -1 })],
      ['indexes of another length', fetches({ featureOfBytes: u32(0) })],
      ['an index out of range', fetches({ featureOfBytes: u32(0, 5) })],
      ['targets without indexes', fetches({ featureOfBytes: undefined })],
    ] as const) {
      assert.throws(() => fetchCodec.decode(bytes), UndecodableMessageError, what);
    }
  });

  it('decode batches of the earlier form (an object per outlink)', async () => {
    const { fetchCodec } = await import('../src/actors/messages.js');
    const earlier = { type: 'fetches', results: [{ url: 'http://a/', status: 200, fetchedAt: 1, outlinks: [{ target: 'http://b/', features: body }] }] };
    assert.deepEqual(fetchCodec.decode(packr.pack(earlier)), earlier);
  });

  it('refuse bad columns with UndecodableMessageError (the consumer dead-letters them)', async () => {
    const { fetchCodec, linkOpCodec } = await import('../src/actors/messages.js');
    const links = (v: object) => packr.pack({ type: 'links', kinds: [0], sources: ['http://a/'], sourceOf: [0], targets: ['http://b/'], features: [body], featureOf: [0], ...v });
    assert.doesNotThrow(() => linkOpCodec.decode(links({})));
    for (const [what, bytes] of [
      ['a column of another length', links({ targets: ['http://b/', 'http://c/'] })],
      ['an unknown kind', links({ kinds: [7] })],
      ['a source index out of range', links({ sourceOf: [1] })],
      ['a feature index out of range', links({ featureOf: [3] })],
      ['features that are not objects', links({ features: [1] })],
    ] as const) {
      assert.throws(() => linkOpCodec.decode(bytes), UndecodableMessageError, what);
    }
    const fetches = (r: object) => packr.pack({ type: 'fetches', features: [body], results: [{ url: 'http://a/', status: 200, fetchedAt: 1, ...r }] });
    assert.throws(() => fetchCodec.decode(fetches({ outlinkTargets: ['http://b/'], outlinkFeatureOf: [] })), UndecodableMessageError, 'lengths differ');
    assert.throws(() => fetchCodec.decode(fetches({ outlinkTargets: ['http://b/'], outlinkFeatureOf: [2] })), UndecodableMessageError, 'index out of range');
    assert.throws(() => fetchCodec.decode(fetches({ outlinkTargets: [3], outlinkFeatureOf: [0] })), UndecodableMessageError, 'target not a string');
  });
});
