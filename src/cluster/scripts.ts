import type { Redis } from 'ioredis';

/**
 * The Lua scripts of cluster coordination. Each runs atomically on the Redis server, which is
 * what makes "check the holder, then change the key" safe between workers (Redis' own
 * single-instance lock recipe: `SET key token NX PX`, and a compare-and-delete script to
 * release; here also compare-and-expire to renew). A lease's value is `<member id> <epoch>`,
 * unique per acquisition, so it doubles as the token. Keys: see `keys.ts`.
 */
const LUA = {
  /**
   * KEYS: lease, epoch counter[, assignment hash]; ARGV: member id, ttl ms[, unit].
   * With the assignment hash, refuses (-1) unless the hash assigns `unit` to the member.
   * Returns 0 when the lease is held (by anyone), else the new epoch (INCR), and sets the lease.
   */
  acquire: `
if #KEYS >= 3 and redis.call('HGET', KEYS[3], ARGV[3]) ~= ARGV[1] then return -1 end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local epoch = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. epoch, 'PX', ARGV[2])
return epoch
`,
  /** KEYS: leases; ARGV: ttl ms, then each lease's value. Returns per lease 1 (renewed) or 0 (not held with that value). */
  renew: `
local out = {}
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[i + 1] then
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
`,
  /** KEYS: lease; ARGV: value. Deletes the lease if it holds `value`; returns 1 if it did. */
  release: `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`,
  /** KEYS: epoch counter; ARGV: at least. Raises the counter to `at least` (never lowers it); returns its value. */
  raiseEpoch: `
local e = tonumber(redis.call('GET', KEYS[1]) or '0')
local want = tonumber(ARGV[1])
if e < want then redis.call('SET', KEYS[1], want); return want end
return e
`,
  /**
   * KEYS: member key, member set, retiring marker; ARGV: member id, report JSON, ttl ms.
   * A worker's first heartbeat: refused (0) while the cluster is being retired, else sets the
   * member key and adds the id to the set (1).
   */
  join: `
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('SADD', KEYS[2], ARGV[1])
return 1
`,
  /** KEYS: hash; ARGV: field, at least. Raises the field to `at least` (never lowers it); returns its value. */
  raiseField: `
local e = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '-1')
local want = tonumber(ARGV[2])
if e < want then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]); return ARGV[2] end
return tostring(e)
`,
  /**
   * KEYS: leader lease, assignment hash, round counter; ARGV: leader value, n, then n pairs
   * (unit, member id) to set, then units to remove. Writes only while the leader lease holds
   * `leader value` (-1 otherwise); returns the new round.
   */
  writeAssignment: `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local n = tonumber(ARGV[2])
for i = 0, n - 1 do redis.call('HSET', KEYS[2], ARGV[3 + 2 * i], ARGV[4 + 2 * i]) end
for i = 3 + 2 * n, #ARGV do redis.call('HDEL', KEYS[2], ARGV[i]) end
return redis.call('INCR', KEYS[3])
`,
} as const;

/** Names of the cluster scripts. */
export type ClusterScript = keyof typeof LUA;

type ScriptClient = Record<string, (numKeys: number, ...keysAndArgs: Array<string | number>) => Promise<unknown>>;

/**
 * Registers the scripts on `redis` with ioredis' `defineCommand` (EVALSHA, falling back to
 * EVAL after a server restart). Call once per connection.
 */
export function defineClusterScripts(redis: Redis): void {
  for (const [name, lua] of Object.entries(LUA)) redis.defineCommand(`sfc_${name}`, { lua });
}

/** The Lua source of script `name` (for a connection of another thread: `LeaseKeeper`). */
export function clusterScriptSource(name: ClusterScript): string {
  return LUA[name];
}

/** Runs script `name` (registered by `defineClusterScripts`). @throws the server's and the connection's errors */
export function runClusterScript(redis: Redis, name: ClusterScript, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown> {
  return (redis as unknown as ScriptClient)[`sfc_${name}`]!(keys.length, ...keys, ...args);
}
