import { test } from 'node:test';
import assert from 'node:assert/strict';
import { askReplyCodec, askRequestCodec } from '../src/cluster/askWire.js';

// Found by a new user: a query hook's bigint counter, asked across the cluster, arrived as a
// number (2n ** 60n + 1n as 1152921504606847000). Asks keep bigints, and numbers stay numbers.
test('the ask wire keeps bigints as bigints and numbers as numbers, both ways', () => {
  const answer = { clicks: 2n ** 60n + 1n, small: 5n, views: 2 ** 40 + 3, share: 0.25, neg: -(2 ** 45) };
  const reply = askReplyCodec.decode(askReplyCodec.encode({ id: 'a1', worker: 'w1', ok: true, answer }));
  assert.ok(reply.ok);
  assert.deepEqual(reply.answer, answer);
  assert.equal(typeof (reply.answer as typeof answer).views, 'number');
  const request = askRequestCodec.decode(askRequestCodec.encode({ id: '0123456789abcdef0123456789abcdef', replyTo: 0, stage: 'sessions', partition: 3, expiresAt: Date.now() + 1000, request: { after: 2n ** 62n, limit: 10 } }));
  assert.deepEqual(request.request, { after: 2n ** 62n, limit: 10 });
});
