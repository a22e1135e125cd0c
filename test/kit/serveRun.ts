import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot } from './datasets.js';

/**
 * Starts `shardflow serve ...args` (the repo's bin, `SHARDFLOW_TOKEN` empty unless `env` sets
 * it), runs `body` with its API URL and its stderr so far once it listens, then stops it
 * (SIGTERM) and waits for it to exit.
 * @throws Error with its stderr when it exits before it listens; what `body` throws
 */
export async function withServe(args: readonly string[], env: NodeJS.ProcessEnv, body: (api: string, stderr: () => string) => Promise<void>): Promise<void> {
  const child = spawn(process.execPath, [join(repoRoot, 'bin/shardflow.mjs'), 'serve', ...args], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, SHARDFLOW_TOKEN: '', ...env } });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const closed = new Promise((ok) => child.once('close', ok));
  try {
    const api = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d) => {
        out += d;
        const m = /query API on http:\/\/[^:]+:(\d+)/.exec(out);
        if (m) resolve(`http://127.0.0.1:${m[1]}`);
      });
      child.once('close', (code) => reject(new Error(`serve exited ${code}: ${stderr}`)));
    });
    await body(api, () => stderr);
  } finally {
    if (child.exitCode === null) child.kill('SIGTERM');
    await closed;
  }
}
