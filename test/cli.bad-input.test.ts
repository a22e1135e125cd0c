import assert from 'node:assert/strict';
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';

// The CLI as a user meets it: bad input gives one clear line on stderr and exit code 2 (option
// values commander refuses too), never a stack trace; `rank` leaves no temp folder; a crawl
// that stored nothing exits 1.
const bin = path.resolve('bin/shardflow.mjs');
const H = 'examples/data/hollins';
const run = (args: string[], env: Record<string, string> = {}) =>
  spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 120_000, env: { ...process.env, ...env } });

describe('shardflow CLI on bad input', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'shardflow-cli-'));
  const out = path.join(dir, 'scores.tsv');

  it('names the missing file, the bad graph line, the bad broker, without a stack', () => {
    writeFileSync(path.join(dir, 'pages.txt'), 'http://a.test/\nhttp://b.test/\n');
    writeFileSync(path.join(dir, 'links.tsv'), 'http://a.test/ http://b.test/\n');
    writeFileSync(path.join(dir, 'three.tsv'), 'http://a.test/\thttp://b.test/\nhttp://a.test/\thttp://b.test/\thttp://c.test/\n');
    writeFileSync(path.join(dir, 'nohost.tsv'), 'http://a.test/\tb.test/x\n');
    // Found by a new user: bytes that are not UTF-8 were decoded as U+FFFD, so two URLs
    // differing only there became one page (exit 0); a corrupt .xz gave a TypeError.
    writeFileSync(path.join(dir, 'latin1.tsv'), Buffer.concat([Buffer.from('http://a.test/\thttp://b.test/\nhttp://a.test/\thttp://b.test/'), Buffer.from([0xe9]), Buffer.from('\n')]));
    writeFileSync(path.join(dir, 'corrupt.tsv.xz'), Buffer.from('\xfd7zXZ\0 not xz at all'));
    writeFileSync(path.join(dir, 'empty.txt'), '');
    for (const [args, expected] of [
      [['rank', '--pages', path.join(dir, 'nope.txt'), '--links', `${H}/links.tsv`, '--out', out], /shardflow: ENOENT: no such file or directory, open '.*nope\.txt'/],
      [['rank', '--pages', `${H}/pages.txt`, '--links', `${H}/links.tsv`, '--out', path.join(dir, 'no/such/dir.tsv')], /ENOENT.*dir\.tsv/],
      [['rank', '--pages', path.join(dir, 'pages.txt'), '--links', path.join(dir, 'links.tsv'), '--out', out], /links\.tsv:1: expected source<TAB>target/],
      [['rank', '--pages', `${H}/pages.txt`, '--links', `${H}/links.tsv`, '--out', out, '--broker', 'foo://x'], /unsupported broker "foo:\/\/x"/],
      // Found by a new user: a third column made a page whose URL held a tab; a URL without a host failed later without its line.
      [['rank', '--pages', path.join(dir, 'pages.txt'), '--links', path.join(dir, 'three.tsv'), '--out', out], /three\.tsv:2: expected source<TAB>target, found more than two tab-separated fields/],
      [['rank', '--pages', path.join(dir, 'pages.txt'), '--links', path.join(dir, 'nohost.tsv'), '--out', out], /nohost\.tsv:1: "b\.test\/x" is not an absolute URL \(scheme:\/\/host\.\.\.\)/],
      [['rank', '--pages', path.join(dir, 'pages.txt'), '--links', path.join(dir, 'latin1.tsv'), '--out', out], /latin1\.tsv:2: not UTF-8/],
      [['rank', '--pages', path.join(dir, 'pages.txt'), '--links', path.join(dir, 'corrupt.tsv.xz'), '--out', out], /corrupt\.tsv\.xz: not a valid \.xz file/],
      [['rank', '--pages', path.join(dir, 'empty.txt'), '--links', path.join(dir, 'empty.txt'), '--out', out], /empty\.txt hold no page: nothing to rank/],
    ] as const) {
      const r = run([...args]);
      assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, expected);
      assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
    }
  });

  it('reads .xz graph files (found by a new user: the compiled CLI refused every one with a TypeError)', () => {
    writeFileSync(path.join(dir, 'good.tsv'), 'http://a.test/\thttp://b.test/\nhttp://b.test/\thttp://a.test/\n');
    writeFileSync(path.join(dir, 'good.tsv.xz'), execFileSync('xz', ['-c', path.join(dir, 'good.tsv')]));
    const r = run(['rank', '--pages', path.join(dir, 'pages.txt'), '--links', path.join(dir, 'good.tsv.xz'), '--out', out, '--partitions', '2']);
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(readFileSync(out, 'utf8').trim().split('\n').map((l) => l.split('\t')[0]).sort(), ['http://a.test/', 'http://b.test/']);
  });

  it('a rank that does not converge says why, exits 1 and leaves --out as it was', () => {
    // Found by a new user: it printed "ranked ... in 1000 rounds", exited 1 with no reason and overwrote --out.
    const kept = path.join(dir, 'kept.tsv');
    writeFileSync(kept, 'earlier scores\n');
    const r = run(['rank', '--pages', `${H}/pages.txt`, '--links', `${H}/links.tsv`, '--out', kept, '--partitions', '2', '--tolerance', '1e-300']);
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /the metric did not converge within 1000 rounds \(its limit\): the residual left, [0-9.e+-]+, keeps the error bound above --tolerance 1e-300\. The scores are not written; --out is left as it was/);
    assert.doesNotMatch(r.stderr, /ranked \d+ pages/);
    assert.equal(readFileSync(kept, 'utf8'), 'earlier scores\n');
  });

  it('refuses out-of-range option values before doing anything, with exit code 2; an unknown command or option too', () => {
    // Decimal digits only (found by a new user: `--partitions 0x10` ran 16 partitions).
    for (const bad of [['--partitions', '99999'], ['--partitions', '0'], ['--partitions', '0x10'], ['--partitions', '1e1'], ['--partitions', ''], ['--weights', 'fancy']]) {
      const r = run(['rank', '--pages', `${H}/pages.txt`, '--links', `${H}/links.tsv`, '--out', out, ...bad]);
      assert.equal(r.status, 2, 'bad input: exit 2, not the 1 of a command that failed');
      assert.match(r.stderr, /is invalid/);
    }
    for (const [args, message] of [[['nosuch'], /unknown command 'nosuch'/], [['rank', '--pages', `${H}/pages.txt`, '--links', `${H}/links.tsv`, '--out', out, '--no-such-option'], /unknown option '--no-such-option'/], [['query', 'top', '--limit', '0'], /argument '0' is invalid/],
      // Found by a new user: a --limit over the API's 1,000 went to the server (exit 3 with none up).
      [['query', 'backlinks', 'http://a.test/', '--limit', '1001', '--api', 'http://127.0.0.1:9'], /argument '1001' is invalid\. expected an integer from 1 to 1000/],
      [['serve', '--data-dir', dir, '--port', '0x50'], /argument '0x50' is invalid\. expected a port in 0\.\.65535/],
      // Found by a new user: `--lease-ms 100` ran, and logged 25 timed-out heartbeats in 10 s.
      [['worker', '--cluster', 'redis://127.0.0.1:9', '--cluster-name', 'x', '--data-dir', dir, '--web-index', '--lease-ms', '100'], /argument '100' is invalid\. expected an integer >= 500/]] as const) {
      const r = run([...args]);
      assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, message);
    }
    assert.equal(run(['rank', '--help']).status, 0, 'help is not an error');
  });

  it('a taken --inspect-port stops the job at once with exit 1 and says to give another port (found by a new user: exit 2)', async () => {
    const { createServer } = await import('node:net');
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as { port: number }).port;
    try {
      const r = await new Promise<{ status: number | null; stderr: string }>((resolve) => {
        execFile(process.execPath, [bin, 'rank', '--pages', `${H}/pages.txt`, '--links', `${H}/links.tsv`, '--out', out, '--inspect-port', String(port)], { encoding: 'utf8' }, (err, _stdout, stderr) =>
          resolve({ status: err ? (err as { code?: number }).code ?? null : 0, stderr }));
      });
      assert.equal(r.status, 1, r.stderr);
      assert.match(r.stderr, new RegExp(`--inspect-port ${port} on 127\\.0\\.0\\.1: .*another process listens there; give another port, or 0 for any free one`));
    } finally {
      holder.close();
    }
  });

  it('a crawl whose only seed is unreachable stores nothing, says so and exits 1 (it exited 0)', () => {
    const r = run(['crawl', '--seed', 'http://a.test/', '--map', 'a.test=127.0.0.1:1', '--data-dir', path.join(dir, 'unreachable'), '--partitions', '2']);
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stdout, /pages stored: 0;/);
    assert.match(r.stdout, /blocked: 1 URL, robots\.txt unreachable \(fetch failed: connect ECONNREFUSED 127\.0\.0\.1:1\)/);
    assert.match(r.stderr, /shardflow crawl: no page was stored/);
  });

  it('rank removes its temp data folder and prints --version', () => {
    const before = new Set(readdirSync(dir));
    const r = run(['rank', '--pages', `${H}/pages.txt`, '--links', `${H}/links.tsv`, '--out', out, '--partitions', '2'], { TMPDIR: dir });
    assert.equal(r.status, 0, r.stderr);
    // Nor when its broker is refused or not reachable (found by a new user: 16 stores and a lock were left).
    for (const broker of ['http://x', 'redis://127.0.0.1:1']) {
      const refused = run(['rank', '--pages', `${H}/pages.txt`, '--links', `${H}/links.tsv`, '--out', out, '--partitions', '2', '--broker', broker], { TMPDIR: dir });
      assert.notEqual(refused.status, 0, broker);
    }
    const left = readdirSync(dir).filter((f) => !before.has(f) && f.startsWith('shardflow-'));
    assert.deepEqual(left, [], 'no shardflow-* temp folder left');
    assert.match(run(['--version']).stdout, /^\d+\.\d+\.\d+/);
    rmSync(dir, { recursive: true, force: true });
  });
});
