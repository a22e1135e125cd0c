import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import type { LinkFeatures } from '../src/actors/messages.js';
import { reasonableSurferWeights, weightFunction, weightTable } from '../src/actors/metrics/weights.js';

/** The reasonable-surfer factors written out as a formula: what the default table must give. */
function byFormula(f: LinkFeatures): number {
  let w = 1;
  if (f.rel.some((r) => r === 'nofollow' || r === 'ugc' || r === 'sponsored')) w *= 0.1;
  if (f.region === 'nav') w *= 0.5;
  else if (f.region === 'footer') w *= 0.3;
  if (f.sameHost) w *= 0.7;
  if (f.anchor.length === 0) w *= 0.6;
  return w * (f.position < 0.2 ? 1.2 : 1.2 - 0.4 * ((f.position - 0.2) / 0.8));
}

function* features(): Generator<LinkFeatures> {
  for (const rel of [[], ['nofollow'], ['ugc', 'sponsored'], ['noopener']])
    for (const region of ['nav', 'footer', 'body'] as const)
      for (const sameHost of [false, true])
        for (const anchor of ['', 'text'])
          for (const position of [0, 0.1, 0.2, 0.5, 0.99]) yield { rel, region, sameHost, anchor, position };
}

describe('link weight tables', () => {
  it('the default table gives the reasonable-surfer factors of the formula', () => {
    for (const f of features()) assert.ok(Math.abs(reasonableSurferWeights(f) - byFormula(f)) < 1e-12, JSON.stringify(f));
  });

  it('a table from a JSON file weighs links by its factors; missing factors are 1', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'shardflow-weights-'));
    try {
      const file = path.join(dir, 'table.json');
      writeFileSync(file, JSON.stringify({ rel: { nofollow: 0 }, region: { footer: 0.25 } }));
      const weigh = weightFunction(file);
      const base: LinkFeatures = { rel: [], region: 'body', sameHost: true, anchor: '', position: 0.7 };
      assert.equal(weigh(base), 1);
      assert.equal(weigh({ ...base, region: 'footer' }), 0.25);
      assert.equal(weigh({ ...base, rel: ['nofollow'] }), 0);
      // A link to the page itself: its own factor (0 drops it from the metric); 1 when not given.
      writeFileSync(file, JSON.stringify({ selfLink: 0, sameHost: 0.5 }));
      const noSelf = weightFunction(file);
      assert.equal(noSelf({ ...base, selfLink: true }), 0);
      assert.equal(noSelf(base), 0.5);
      assert.equal(reasonableSurferWeights({ ...base, selfLink: true }), reasonableSurferWeights(base), 'the default table keeps self-links as they were');
      writeFileSync(file, '{ not json');
      assert.throws(() => weightFunction(file), (e: Error) => e instanceof RangeError && e.message.includes('table.json'));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses factors that are negative, not numbers, or fields it does not know', () => {
    for (const bad of [{ sameHost: -1 }, { noAnchor: 'x' }, { selfLink: -0.5 }, { region: { header: 1 } }, { rel: { nofollow: Infinity } }, { position: { start: 1 } }, { colour: 1 }, [], null]) {
      assert.throws(() => weightTable(bad as never), RangeError, JSON.stringify(bad));
    }
    assert.throws(() => weightFunction('fancy'), RangeError);
  });
});
