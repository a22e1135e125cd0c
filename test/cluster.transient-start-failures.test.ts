import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BrokerDisconnectedError, CheckpointDamagedError, RestartIntensityExceededError, S3RequestError } from '../src/errors.js';
import { transientCause } from '../src/cluster/worker.js';

// Found by a new user: a 10 s S3 outage while partitions restored left 5 of 16 refused for good
// (`failed`, unassigned until an operator restarted their workers). A worker now tells a start
// that failed because the checkpoint store or the broker did not answer (tried again) from a
// refusal (kept, with its reason).
test('a start failure is retried when the checkpoint store or broker did not answer, refused otherwise', () => {
  const noAnswer = new S3RequestError('GET', 's3://trial/', 0, 'ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:9095');
  const wrapped = new RestartIntensityExceededError('/dedup/p3', 'more than 100 restarts within 10000 ms', { cause: noAnswer });
  assert.match(transientCause(noAnswer) ?? '', /S3 GET s3:\/\/trial\/: no answer/);
  assert.match(transientCause(wrapped) ?? '', /S3 GET s3:\/\/trial\/: no answer/, 'found among the causes');
  for (const status of [408, 429, 500, 503]) assert.ok(transientCause(new S3RequestError('PUT', 's3://b/k', status, 'X', 'y')), String(status));
  assert.ok(transientCause(new BrokerDisconnectedError('pulsar ws://127.0.0.1:8080: connect ECONNREFUSED')));
  // Refusals: denied credentials, a missing object, a damaged checkpoint, anything else.
  assert.equal(transientCause(new S3RequestError('GET', 's3://b/', 403, 'SignatureDoesNotMatch', 'bad key')), undefined);
  assert.equal(transientCause(new S3RequestError('GET', 's3://b/k', 404, 'NoSuchKey', 'gone')), undefined);
  assert.equal(transientCause(new CheckpointDamagedError('checkpoint x@1 is damaged: 000047.sst is missing', 'x', 1, '000047.sst')), undefined);
  assert.equal(transientCause(new Error('a store of another shape')), undefined);
});
