import { readFileSync, statSync } from 'node:fs';
import { InvalidArgumentError as CommanderArgumentError, type Command } from 'commander';
import { hostHeaderCheck, isLoopbackName } from '../index.js';

/**
 * The query API's access options, shared by `serve`, `crawl --serve` and `query`: where the
 * bearer token comes from, and what `serve` may expose on a non-loopback address.
 * Rules in docs/query-api.md ("Serving").
 */

/** Environment variable read for the token when neither `--token` nor `--token-file` is given. */
export const TOKEN_ENV = 'SHARDFLOW_TOKEN';

/** Where a line of warning goes: stderr by default. */
export type Warn = (line: string) => void;

const toStderr: Warn = (line) => process.stderr.write(`${line}\n`);

/**
 * Adds `--token-file <path>` and `--token <token>` to `command`.
 * @param role `server`: the token the API requires; `client`: the token sent to the API
 */
export function addTokenOptions(command: Command, role: 'server' | 'client'): Command {
  const what = role === 'server' ? 'bearer token every request must carry (admin routes need one)' : 'bearer token sent to the API';
  return command
    .option('--token-file <path>', `file holding the ${what}; one line (default: $${TOKEN_ENV})`)
    .option('--token <token>', `the ${what}, given inline: visible to other users in \`ps\` and kept in shell history, prefer --token-file or $${TOKEN_ENV}`);
}

/** Adds `serve`'s `--allowed-host <name>` (repeatable) and `--insecure`. */
export function addExposureOptions(command: Command): Command {
  return command
    .option('--allowed-host <name>', 'also answer requests whose Host header is this name (repeatable; .example.org: the domain and its subdomains); loopback names always, and with a non-loopback --host its own address and IP addresses', allowedHost, [])
    .option('--insecure', 'allow a non-loopback --host without a token: anyone who can reach it reads the index', false);
}

/**
 * The token chosen by `--token`, `--token-file` or `$SHARDFLOW_TOKEN`, in that order; an empty
 * variable counts as unset. `--token` warns (the process list shows it); a token file readable by
 * group or others warns too. The file's content is trimmed of surrounding white space.
 * @returns the token, or `undefined` when none is given
 * @throws commander's InvalidArgumentError when both flags are given, the file cannot be read, or
 *   the token is empty or holds white space or control characters (it goes in a header)
 */
export function resolveToken(opts: { readonly token?: string; readonly tokenFile?: string }, env: NodeJS.ProcessEnv = process.env, warn: Warn = toStderr): string | undefined {
  if (opts.token !== undefined && opts.tokenFile !== undefined) throw new CommanderArgumentError('give --token or --token-file, not both');
  if (opts.token !== undefined) {
    warn(`shardflow: warning: --token is visible to other users in \`ps\` and kept in shell history; prefer --token-file PATH or $${TOKEN_ENV}`);
    return checkToken(opts.token, '--token');
  }
  if (opts.tokenFile !== undefined) {
    let text: string;
    try {
      text = readFileSync(opts.tokenFile, 'utf8');
    } catch (err) {
      throw new CommanderArgumentError(`cannot read --token-file ${opts.tokenFile}: ${(err as Error).message}`);
    }
    const mode = statSync(opts.tokenFile).mode;
    if (process.platform !== 'win32' && (mode & 0o077) !== 0) {
      warn(`shardflow: warning: --token-file ${opts.tokenFile} is readable by other users (mode ${(mode & 0o777).toString(8)}); chmod 600 it`);
    }
    return checkToken(text.trim(), `--token-file ${opts.tokenFile}`);
  }
  const fromEnv = env[TOKEN_ENV];
  return fromEnv === undefined || fromEnv === '' ? undefined : checkToken(fromEnv, `$${TOKEN_ENV}`);
}

/**
 * Decides whether `serve` may listen on `host`: a loopback address always; any other address
 * only with a token, or with `--insecure`, which then warns on stderr in capitals.
 * @throws commander's InvalidArgumentError naming the flags to pass when a non-loopback host has
 *   neither a token nor `--insecure`
 */
export function checkExposure(options: { readonly host: string; readonly token: string | undefined; readonly insecure: boolean }, warn: Warn = toStderr): void {
  if (options.token !== undefined || isLoopbackName(options.host)) return;
  if (!options.insecure) {
    throw new CommanderArgumentError(`refusing to serve the query API on ${options.host} without a token: anyone who can reach that address could read the index. Pass --token-file PATH (or set $${TOKEN_ENV}), or --insecure to serve it unauthenticated anyway`);
  }
  warn(`shardflow: WARNING: --insecure: the query API on ${options.host} has NO AUTHENTICATION; anyone who can reach that address reads the whole index. Use --token-file PATH unless this network is yours alone.`);
}

/** Parses one `--allowed-host`. @throws commander's InvalidArgumentError for a name that is not a host name */
function allowedHost(value: string, previous: string[] = []): string[] {
  try {
    hostHeaderCheck({ bindHost: '127.0.0.1', allowedHosts: [value] });
  } catch (err) {
    throw new CommanderArgumentError((err as Error).message);
  }
  return [...previous, value];
}

function checkToken(token: string, from: string): string {
  if (token.length === 0) throw new CommanderArgumentError(`${from}: the token is empty`);
  // A header value: visible ASCII only (RFC 6750 b64token is narrower still).
  if (!/^[\x21-\x7e]+$/.test(token)) throw new CommanderArgumentError(`${from}: the token must be one line of visible ASCII characters, without spaces`);
  return token;
}
