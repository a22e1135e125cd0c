import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fnv1a32, hostOf } from '../src/runtime/partitioner.js';
import { hostPartitioner } from '../src/actors/partition/hostPartitioner.js';

/** FNV-1a over the UTF-8 bytes, written out: what fnv1a32 must equal for every text. */
function reference(text: string): number {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(text, 'utf8')) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h >>> 0;
}

describe('host partitioner', () => {
  it('fnv1a32 gives the published FNV-1a test vectors', () => {
    // http://www.isthe.com/chongo/src/fnv/test_fnv.c (FNV1A_32 of "", "a", "foobar").
    assert.equal(fnv1a32(''), 0x811c9dc5);
    assert.equal(fnv1a32('a'), 0xe40c292c);
    assert.equal(fnv1a32('foobar'), 0xbf9cf968);
  });

  it('fnv1a32 hashes the UTF-8 bytes of ASCII and non-ASCII text alike', () => {
    for (const text of ['www.example.org', 'bücher.de', 'xn--bcher-kva.de', '例え.テスト', 'a\u0080b', 'emoji-😀.io']) {
      assert.equal(fnv1a32(text), reference(text), text);
    }
  });

  it('puts every URL of a host on one partition, spread over all partitions', () => {
    const p = hostPartitioner(16);
    assert.equal(p.forUrl('http://Example.org/a'), p.forUrl('http://example.org/b?c'));
    assert.equal(hostOf('https://user@Example.org:8080/x'), 'example.org:8080');
    const used = new Set<number>();
    for (let i = 0; i < 1000; i++) used.add(p.forUrl(`http://host${i}.example/`));
    assert.equal(used.size, 16);
  });
});
