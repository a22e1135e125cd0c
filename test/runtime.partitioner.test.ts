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

  it('hostOf gives the same host after any URL as on its own (its memo of the last authority)', () => {
    // Pairs where the second URL starts with the first one's text, or shares most of it:
    // a memo keyed by too short a prefix would return the first host for the second.
    const urls = [
      'http://a.b/x', 'http://a.bc/x', 'http://a.b', 'http://a.b.c/', 'http://a.b?q', 'http://a.b#f', 'http://a.b\\x',
      'http://A.B/y', 'https://a.b/y', 'http://u@a.b/x', 'http://u@a.b@c.d/x', 'http://a.b:8080/x', 'http://a.b:80/x',
      'http://a.b//x', 'x://a.b/', 'http://a.b/http://c.d/', 'http://%41.b/', 'http://a.b/x',
    ];
    const fresh = (url: string) => {
      // The host computed from scratch: hostOf right after a URL without a closing delimiter
      // (which it does not remember) and another host.
      hostOf('http://zz.example');
      hostOf('http://yy.example/');
      return hostOf(url);
    };
    const expected = new Map(urls.map((u) => [u, fresh(u)]));
    for (const a of urls) {
      for (const b of urls) {
        hostOf(a);
        assert.equal(hostOf(b), expected.get(b), `${b} after ${a}`);
      }
    }
    assert.equal(expected.get('http://a.bc/x'), 'a.bc');
    assert.equal(expected.get('http://u@a.b@c.d/x'), 'c.d');
    hostOf('http://a.b/x');
    assert.throws(() => hostOf('http:/a.b/x'), /scheme/);
    assert.throws(() => hostOf('http:///x'), /empty host/);
  });
});
