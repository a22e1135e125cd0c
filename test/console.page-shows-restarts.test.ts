import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { chromium, type BrowserContext } from 'playwright-core';
import { ActorSystem } from '../src/runtime/actor/index.js';
import { listenInspection, startInspectionServer } from '../src/runtime/inspection/server.js';
import { SupervisorStrategy } from '../src/runtime/supervision/index.js';
import { recordingBehavior, recordingLogger, settle, type Recording } from './kit/index.js';

/** Debian's `chromium` package (`apt-get install -y --no-install-recommends chromium`). */
const CHROMIUM = '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
const inCi = process.env.CI === 'true';

/** A headless Chromium with a fresh profile; `close()` also removes the profile folder. */
async function launchChromium(): Promise<{ context: BrowserContext; close: () => Promise<void> }> {
  const profile = mkdtempSync(join(tmpdir(), 'shardflow-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
    timeout: 60_000,
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

const skip = !haveChromium && !inCi ? `${CHROMIUM} is missing: apt-get install -y --no-install-recommends chromium` : false;

test(
  'the console page shows the supervision tree and a restart appears on it live',
  { skip, timeout: 120_000 },
  async () => {
    assert.ok(haveChromium, `CI=true but ${CHROMIUM} is missing: .ci/run must install Debian's chromium package`);
    const system = ActorSystem.create({ name: 'test', logger: recordingLogger() });
    system.supervise('partitions', SupervisorStrategy.oneForOne(), [
      { name: 'p0', behavior: recordingBehavior('p0', [], { kind: 'indexer' }) },
      { name: 'p1', behavior: recordingBehavior('p1', [], { kind: 'indexer' }) },
    ]);
    await settle();
    const server = await startInspectionServer(system);
    const browser = await launchChromium();
    try {
      const page = await browser.context.newPage();
      const problems: string[] = [];
      page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
      page.on('console', (message) => {
        if (message.type() === 'error') problems.push(`console error: ${message.text()}`);
      });
      await page.goto(`${server.url}/`);

      const row = (path: string) => page.locator(`tr[data-path="${path}"]`);
      const restarts = (path: string) => row(path).locator('td[data-field="restarts"]');
      await row('/partitions/p1').waitFor();
      const paths = await Promise.all((await page.locator('tbody tr').all()).map((r) => r.getAttribute('data-path')));
      assert.deepEqual(paths, ['/', '/partitions', '/partitions/p0', '/partitions/p1']);
      assert.equal(await restarts('/partitions/p1').textContent(), '0');
      assert.equal(await row('/partitions/p1').locator('td[data-field="status"]').textContent(), 'running');
      // Waits go through locators: the page's CSP forbids the string eval behind waitForFunction.
      await page.locator('body[data-connection="open"]').waitFor({ timeout: 10_000 });

      // Crash p1: its receive() throws; the supervisor restarts it.
      await system.lookup<Recording>('/partitions/p1')!.tell({ op: 'throw', error: Object.assign(new Error('disk on fire'), { code: 'SF_ERR_STORE_IO' }) });
      await restarts('/partitions/p1').filter({ hasText: /^1$/ }).waitFor({ timeout: 10_000 });
      assert.equal(await restarts('/partitions/p0').textContent(), '0', 'the sibling did not restart');
      assert.equal(await row('/partitions/p1').locator('td[data-field="lastError"]').textContent(), 'SF_ERR_STORE_IO: disk on fire');
      assert.match((await page.locator('#events li').allTextContents()).join('\n'), /restarted \/partitions\/p1 \[indexer\]/);
      assert.match(await page.locator('#events li.type-failed').first().textContent() ?? '', /failed \/partitions\/p1 \[indexer\] SF_ERR_STORE_IO: disk on fire/);
      assert.equal(await page.locator('#summary').getAttribute('data-restarts'), '1');

      // The filter keeps matching rows and their ancestors.
      await page.locator('#filter').fill('p1');
      await row('/partitions/p0').waitFor({ state: 'hidden', timeout: 5_000 });
      for (const path of ['/', '/partitions', '/partitions/p1']) assert.equal(await row(path).isVisible(), true, path);
      await page.locator('#filter').fill('');
      await row('/partitions/p0').waitFor({ state: 'visible', timeout: 5_000 });

      // The page stays on the same endpoint: a second crash shows as 2.
      await system.lookup<Recording>('/partitions/p1')!.tell({ op: 'reject', error: new Error('again') });
      await restarts('/partitions/p1').filter({ hasText: /^2$/ }).waitFor({ timeout: 10_000 });
      await page.screenshot({ path: join(tmpdir(), 'shardflow-console.png'), fullPage: true });

      // The job ends: the page says so and stops reconnecting (found by a new user: it read
      // `reconnecting` for ever, its rows `running`).
      await system.terminate();
      await page.locator('body[data-connection="ended"]').waitFor({ timeout: 10_000 });
      assert.equal(await page.locator('#connection').textContent(), 'ended');
      assert.match(await page.locator('#summary').textContent() ?? '', /^the job ended at .*; the table shows the last state read before that$/);
      assert.deepEqual(problems, []);
    } finally {
      await browser.close();
      await server.close();
      await system.terminate();
    }
  },
);

test(
  'a page opened before the job\'s system exists waits for it, then shows it live',
  { skip, timeout: 120_000 },
  async () => {
    assert.ok(haveChromium, `CI=true but ${CHROMIUM} is missing: .ci/run must install Debian's chromium package`);
    const endpoint = await listenInspection();
    const browser = await launchChromium();
    const system = ActorSystem.create({ name: 'test', logger: recordingLogger() });
    try {
      const page = await browser.context.newPage();
      await page.goto(`${endpoint.url}/`);
      await page.locator('#summary', { hasText: 'answered 503' }).waitFor({ timeout: 10_000 });
      assert.equal(await page.locator('body').getAttribute('data-connection'), 'reconnecting');

      system.supervise('partitions', SupervisorStrategy.oneForOne(), [{ name: 'p0', behavior: recordingBehavior('p0', [], { kind: 'indexer' }) }]);
      endpoint.attach(system);
      await page.locator('tr[data-path="/partitions/p0"]').waitFor({ timeout: 10_000 });
      await page.locator('body[data-connection="open"]').waitFor({ timeout: 10_000 });
      await system.lookup<Recording>('/partitions/p0')!.tell({ op: 'throw', error: new Error('crash') });
      await page.locator('tr[data-path="/partitions/p0"] td[data-field="restarts"]').filter({ hasText: /^1$/ }).waitFor({ timeout: 10_000 });
    } finally {
      await browser.close();
      await endpoint.close();
      await system.terminate();
    }
  },
);

// Found by a new user: a job stopped with SIGSTOP kept the page's `live` badge and table for as
// long as it stayed stopped. The page now says the job does not answer, and goes live again.
test(
  'a job that stops answering (SIGSTOP) is shown as not answering, and live again once it goes on',
  { skip, timeout: 180_000 },
  async () => {
    assert.ok(haveChromium, `CI=true but ${CHROMIUM} is missing: .ci/run must install Debian's chromium package`);
    const { spawn } = await import('node:child_process');
    const { repoRoot } = await import('./kit/datasets.js');
    const job = spawn(process.execPath, [join(repoRoot, 'bin/shardflow.mjs'), 'demo', '--graph', 'hollins', '--partitions', '4', '--inspect-port', '0'], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'ignore'] });
    const browser = await launchChromium();
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = '';
        job.stdout!.on('data', (d: Buffer) => {
          out += d.toString('utf8');
          const m = /inspection: (http:\/\/127\.0\.0\.1:\d+)\//.exec(out);
          if (m) resolve(m[1]!);
        });
        job.once('exit', (code) => reject(new Error(`demo exited ${code}: ${out}`)));
      });
      const page = await browser.context.newPage();
      await page.goto(`${url}/`);
      await page.locator('body[data-connection="open"]').waitFor({ timeout: 30_000 });
      await page.locator('tr[data-path="/partitions"]').waitFor({ timeout: 30_000 });
      job.kill('SIGSTOP');
      await page.locator('body[data-connection="not answering"]').waitFor({ timeout: 20_000 });
      assert.match(await page.locator('#summary').textContent() ?? '', /the job has not answered for 5 s \(stopped, frozen or overloaded\)/);
      job.kill('SIGCONT');
      await page.locator('body[data-connection="open"]').waitFor({ timeout: 20_000 });
    } finally {
      // A clean stop removes the demo's temp data dir; SIGKILL only if it does not end.
      const exited = new Promise((resolve) => (job.exitCode !== null ? resolve(undefined) : job.once('exit', resolve)));
      job.kill('SIGCONT');
      job.kill('SIGTERM');
      const late = setTimeout(() => job.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(late);
      await browser.close();
    }
  },
);
