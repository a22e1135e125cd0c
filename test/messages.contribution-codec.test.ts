import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Packr } from 'msgpackr';
import { UndecodableMessageError } from '../src/errors.js';
import { contributionCodec } from '../src/actors/messages.js';
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
    // Copies of source metrics for backlinks (keys `target 0x00 source`), alone or with contributions.
    const backlinkKeys = ['http://t.example/\u0000http://s.example/', 'http://ü.example/\u0000http://s.example/ß'];
    const copies = { keys: packKeys(backlinkKeys.map((k) => Buffer.from(k))), values: Float64Array.of(0.15, 7.25e-3) };
    for (const value of [
      { type: 'metrics' as const, round: 9, keys: packKeys([]), deltas: new Float64Array(0), copies },
      { type: 'metrics' as const, round: 9, keys: back.keys, deltas, copies },
    ]) {
      const decoded = contributionCodec.decode(contributionCodec.encode(value));
      assert.deepEqual([...decoded.copies!.values], [0.15, 7.25e-3]);
      assert.deepEqual(backlinkKeys.map((_, i) => Buffer.from(packedKey(decoded.copies!.keys, i)).toString()), backlinkKeys);
      assert.equal(decoded.deltas.length, value.deltas.length);
    }
  });

  it('refuses bytes that are not msgpack, a wrong shape, lengths that differ and offsets out of range', () => {
    const wire = (over: Record<string, unknown>) =>
      packr.pack({ type: 'metrics', round: 1, keyBytes: Buffer.from('ab'), keyEnds: Buffer.from(Uint32Array.of(1, 2).buffer), deltas: Buffer.from(Float64Array.of(1, 2).buffer), ...over });
    assert.doesNotThrow(() => contributionCodec.decode(wire({})));
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
      ['copy values of another length', wire({ copyKeyBytes: Buffer.from('ab'), copyKeyEnds: Buffer.from(Uint32Array.of(2).buffer), copyValues: Buffer.from(Float64Array.of(1, 2).buffer) })],
      ['copy ends past the bytes', wire({ copyKeyBytes: Buffer.from('ab'), copyKeyEnds: Buffer.from(Uint32Array.of(3).buffer), copyValues: Buffer.from(Float64Array.of(1).buffer) })],
    ] as const) {
      assert.throws(() => contributionCodec.decode(bytes), UndecodableMessageError, what);
    }
  });
});

describe('msgpack codecs', () => {
  it('read plain msgpack maps from other producers as well as their own records', async () => {
    const { linkOpCodec } = await import('../src/actors/messages.js');
    const value = { type: 'links' as const, ops: [{ op: 'remove' as const, source: 'http://a/', target: 'http://b/' }] };
    assert.deepEqual(linkOpCodec.decode(packr.pack(value)), value);
    assert.deepEqual(linkOpCodec.decode(linkOpCodec.encode(value)), value);
  });
});
