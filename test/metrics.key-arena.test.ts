import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KeyArena } from '../src/actors/metrics/keyArena.js';

test('KeyArena keeps every key through growth (past 64 KiB, non-ASCII), and compares like Buffer.compare', () => {
  const arena = new KeyArena();
  const urls: string[] = [];
  for (let i = 0; i < 5000; i++) urls.push(i % 7 === 0 ? `http://hôte-${i}.example/päge/${i}` : `http://host-${i % 50}.example/page/${i}`);
  urls.forEach((u, i) => assert.equal(arena.add(u), i));
  assert.equal(arena.count, urls.length);
  assert.ok(arena.end(urls.length - 1) > 1 << 16, 'grew past the first buffer');
  urls.forEach((u, i) => {
    assert.equal(arena.text(i), u);
    assert.deepEqual(arena.bytes.subarray(arena.start(i), arena.end(i)), Buffer.from(u));
  });
  const other = Buffer.concat([Buffer.from('xx'), Buffer.from(urls[7]!), Buffer.from('yy')]);
  const end = 2 + Buffer.byteLength(urls[7]!);
  assert.ok(arena.equals(7, other, 2, end));
  assert.ok(!arena.equals(8, other, 2, end));
  for (const i of [0, 7, 8, 4999]) assert.equal(Math.sign(arena.compare(i, other, 2, end)), Math.sign(Buffer.compare(Buffer.from(urls[i]!), Buffer.from(urls[7]!))));
});
