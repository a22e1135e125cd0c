import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';

/**
 * The Lua scripts of the Redis Streams broker. Each runs atomically on the server, which is
 * what makes "check the owner, then move the message" safe with many consumers. Registered
 * with ioredis `defineCommand` (EVALSHA, falling back to EVAL after a server restart).
 *
 * Shared vocabulary (see `keys.ts`):
 * - `stream`: the topic's stream; `group`: the subscription (consumer group).
 * - `ready`: sorted set of entry ids due for redelivery, score = due time in ms (server
 *   clock, `TIME`) for a nacked entry, and for an entry handed over (due at once) its id's
 *   order below every time (`HANDOVER_SCORE`), so that claims take handed-over entries oldest
 *   id first with a range read, never a sort; an id stays in its last owner's pending entries
 *   list (PEL) until a consumer claims it with XCLAIM, which is what increments Redis'
 *   delivery counter.
 * - `dlq`: the subscription's dead-letter stream.
 * Redelivery count of a delivery = Redis delivery counter - 1.
 *
 * Only standalone Redis: scripts touch keys they compute (consumer liveness keys), which
 * Redis Cluster would reject.
 */

/** Lua helpers prepended to scripts that need them. */
const NOW = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;

/**
 * The `ready` score of an entry handed over: its id `<ms>-<seq>` as ms + seq / 2048, less 2^42.
 * Every such score is negative (entry ids' ms are below 2^42, year 2109), so it is due at once
 * and sorts before every nacked entry's due time; among them the order is the ids' (exact in a
 * double for seq < 2047, the fraction's resolution at that magnitude being 2^-11; a stream
 * adds far fewer entries than that in one ms, and beyond it ties fall back to the members'
 * text order). Before, handed-over entries all had score 0 and a claim read and sorted every
 * due id (tens of thousands after a failover) under Redis' one thread: up to 0.7 s per claim,
 * which stalled every other client's commands past their leases.
 */
const HANDOVER_SCORE = `
local function handover_score(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms) - 4398046511104 + math.min(tonumber(seq), 2047) / 2048
end
`;

/**
 * Moves entry `id` (owned by anyone) to the dead-letter stream with `reason`, then acks it.
 * The dead-letter stream is capped with `MAXLEN ~ maxlen`: Redis trims whole stream nodes, so
 * it keeps at least `maxlen` and at most about `maxlen` + `stream-node-max-entries` (100 by
 * default) entries, the oldest going first. `malformed` is '1' for an entry that was not a
 * message, '0' otherwise (written last, so a foreign field of that name does not count).
 */
const DEAD_LETTER_FN = `
local function dead_letter(stream, ready, dlq, group, id, reason, redeliveries, maxlen, malformed)
  local e = redis.call('XRANGE', stream, id, id)
  if #e > 0 then
    local args = {dlq, 'MAXLEN', '~', maxlen, '*'}
    local f = e[1][2]
    for i = 1, #f do args[#args + 1] = f[i] end
    args[#args + 1] = 'reason'; args[#args + 1] = reason
    args[#args + 1] = 'origin'; args[#args + 1] = id
    args[#args + 1] = 'redeliveryCount'; args[#args + 1] = tostring(redeliveries)
    args[#args + 1] = 'malformed'; args[#args + 1] = malformed
    redis.call('XADD', unpack(args))
  end
  redis.call('XACK', stream, group, id)
  redis.call('ZREM', ready, id)
end
local function owner_count(stream, group, id, consumer)
  local p = redis.call('XPENDING', stream, group, id, id, 1, consumer)
  if #p == 0 then return nil end
  return tonumber(p[1][4])
end
`;

/** The scripts: name -> { keys, lua }. Argument lists are documented per script. */
export const scripts = {
  /**
   * Claims up to `count` due entries from `ready` for `consumer` in score order: handed-over
   * entries oldest id first, then nacked entries by due time (one range read of count + 1).
   * KEYS: stream, ready[, lock]. ARGV: group, consumer, count.
   * Returns `[entries, nextDueMs|false, dueLeft, held]`, entries as `[id, fields, deliveryCount]`,
   * `dueLeft` 1 when due entries were left for a later claim (the caller then reads no new
   * entries yet: a handed-over backlog comes before them); ids no longer pending (acked
   * meanwhile) or trimmed away are dropped from `ready` silently. With a lock key (exclusive
   * and failover subscriptions) nothing is claimed unless `consumer` holds the lock: `held` 0.
   */
  sfClaimReady: {
    numberOfKeys: 2,
    lua: `${NOW}
local stream, ready, lock = KEYS[1], KEYS[2], KEYS[3]
local group, consumer, count = ARGV[1], ARGV[2], tonumber(ARGV[3])
if lock and redis.call('GET', lock) ~= consumer then return {{}, false, 0, 0} end
local now = now_ms()
-- Handed-over entries first, oldest id first (their scores), then nacked ones by due time.
local ids = redis.call('ZRANGEBYSCORE', ready, '-inf', now, 'LIMIT', 0, count + 1)
local out = {}
for i = 1, math.min(#ids, count) do
  local id = ids[i]
  redis.call('ZREM', ready, id)
  local c = redis.call('XCLAIM', stream, group, consumer, 0, id)
  if #c > 0 and type(c[1]) == 'table' and type(c[1][2]) == 'table' then
    local p = redis.call('XPENDING', stream, group, id, id, 1)
    out[#out + 1] = {c[1][1], c[1][2], p[1][4]}
  end
end
local nxt = redis.call('ZRANGE', ready, 0, 0, 'WITHSCORES')
return {out, nxt[2] or false, #ids > count and 1 or 0, 1}
`,
  },

  /**
   * Reads up to `count` new entries (`XREADGROUP ... >`, not blocking) for `consumer` only if
   * it holds the subscription's lock: the read of an exclusive or failover subscription. A
   * holder paused past its lease (SIGSTOP, a VM stall) that wakes reads nothing more, and a
   * blocked XREADGROUP of a paused process, which Redis serves all the same, is never
   * registered: such entries went to the paused holder's pending list and reached the next
   * holder after newer ones, which per-producer applied marks dropped (found by a new user).
   * KEYS: stream, lock. ARGV: group, consumer, count.
   * Returns `[held, entries, lastId]`: held 0 when `consumer` does not hold the lock (nothing
   * read); entries as `[id, fields]`; lastId the stream's last id when nothing was read (what a
   * plain `XREAD BLOCK` then waits after), else false.
   */
  sfReadHeld: {
    numberOfKeys: 2,
    lua: `
local stream, lock = KEYS[1], KEYS[2]
local group, consumer, count = ARGV[1], ARGV[2], ARGV[3]
if redis.call('GET', lock) ~= consumer then return {0, {}, false} end
local read = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count, 'STREAMS', stream, '>')
local entries = (read and read[1] and read[1][2]) or {}
if #entries > 0 then return {1, entries, false} end
local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
return {1, {}, (last[1] and last[1][1]) or '0-0'}
`,
  },

  /**
   * Acks `id` if `consumer` still owns it (a stale ack after a handover is ignored).
   * KEYS: stream, ready. ARGV: group, consumer, id. Returns 1 when acked, 0 when ignored.
   */
  sfAck: {
    numberOfKeys: 2,
    lua: `
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1, ARGV[2])
if #p == 0 then return 0 end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
redis.call('ZREM', KEYS[2], ARGV[3])
return 1
`,
  },

  /**
   * Negative ack by its owner: schedules redelivery after `delayMs`, or dead-letters once
   * the next delivery would exceed `maxRedeliveries` (-1 = unlimited).
   * KEYS: stream, ready, dlq. ARGV: group, consumer, id, delayMs, maxRedeliveries, reason,
   * maxDeadLetters. Returns 0 ignored (not owned), 1 scheduled, 2 dead-lettered.
   */
  sfNack: {
    numberOfKeys: 3,
    lua: `${NOW}${DEAD_LETTER_FN}
local stream, ready, dlq = KEYS[1], KEYS[2], KEYS[3]
local group, consumer, id = ARGV[1], ARGV[2], ARGV[3]
local delay, max, reason = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local count = owner_count(stream, group, id, consumer)
if count == nil then return 0 end
if max >= 0 and count > max then
  dead_letter(stream, ready, dlq, group, id, reason, count - 1, ARGV[7], '0')
  return 2
end
redis.call('ZADD', ready, now_ms() + delay, id)
return 1
`,
  },

  /**
   * Dead letter by the owner: explicit (`deadLetter`), or an entry that is not a message.
   * KEYS: stream, ready, dlq. ARGV: group, consumer, id, reason, maxDeadLetters, malformed
   * ('1' or '0'). Returns 1 when moved, 0 when ignored (not owned).
   */
  sfDeadLetter: {
    numberOfKeys: 3,
    lua: `${DEAD_LETTER_FN}
local count = owner_count(KEYS[1], ARGV[1], ARGV[3], ARGV[2])
if count == nil then return 0 end
dead_letter(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[3], ARGV[4], count - 1, ARGV[5], ARGV[6])
return 1
`,
  },

  /**
   * Hands every entry pending on `consumer` to the others: each id goes to `ready`, due now
   * (`ZADD NX`: an entry already nacked keeps its delay). Then deletes the consumer's
   * liveness key. KEYS: stream, ready, alive. ARGV: group, consumer.
   * Returns the number of entries handed over.
   */
  sfHandover: {
    numberOfKeys: 3,
    lua: `${HANDOVER_SCORE}
local stream, ready, group, consumer = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local n, start = 0, '-'
while true do
  local p = redis.call('XPENDING', stream, group, start, '+', 1000, consumer)
  if #p == 0 then break end
  for _, e in ipairs(p) do
    redis.call('ZADD', ready, 'NX', handover_score(e[1]), e[1])
    n = n + 1
  end
  if #p < 1000 then break end
  start = '(' .. p[#p][1]
end
redis.call('DEL', KEYS[3])
return n
`,
  },

  /**
   * Housekeeping by any live consumer: consumers whose liveness key (`alivePrefix` + name)
   * expired are dead; their pending entries go to `ready` (as in `sfHandover`), and dead
   * consumers with nothing pending are deleted from the group. With `self` and `all` = '1'
   * (a consumer that just took an exclusive or failover lock) every other consumer's pending
   * entries go to `ready`, live or not: only the lock holder reads, so they are an earlier
   * holder's, and they must come before the entries the new holder reads next. A holder
   * SIGKILLed between refreshing its liveness key and renewing its lock leaves a lock that
   * expires first; its entries handed over only once its liveness key expired came after
   * newer ones, and receivers that keep a mark per producer dropped them as applied.
   * KEYS: stream, ready. ARGV: group, alivePrefix[, self, all]. Returns `[handedOver, deletedConsumers]`.
   */
  sfReap: {
    numberOfKeys: 2,
    lua: `${HANDOVER_SCORE}
local stream, ready, group, prefix = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local self, all = ARGV[3], ARGV[4] == '1'
local handed, deleted = 0, 0
local cs = redis.call('XINFO', 'CONSUMERS', stream, group)
for _, c in ipairs(cs) do
  local name, pending
  for i = 1, #c, 2 do
    if c[i] == 'name' then name = c[i + 1] elseif c[i] == 'pending' then pending = tonumber(c[i + 1]) end
  end
  local dead = name and redis.call('EXISTS', prefix .. name) == 0
  if name and name ~= self and (dead or (all and pending > 0)) then
    if pending == 0 then
      redis.call('XGROUP', 'DELCONSUMER', stream, group, name)
      deleted = deleted + 1
    else
      local start = '-'
      while true do
        local p = redis.call('XPENDING', stream, group, start, '+', 1000, name)
        if #p == 0 then break end
        for _, e in ipairs(p) do
          handed = handed + redis.call('ZADD', ready, 'NX', handover_score(e[1]), e[1])
        end
        if #p < 1000 then break end
        start = '(' .. p[#p][1]
      end
    end
  end
end
return {handed, deleted}
`,
  },

  /**
   * Retention: drops entries that every group has acked, i.e. below the smallest of each
   * group's oldest pending id and last-delivered id. No group: nothing is trimmed.
   * KEYS: stream. Returns the number of entries trimmed.
   */
  sfTrim: {
    numberOfKeys: 1,
    lua: `
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local function less(a, b)
  local am, as = parse(a)
  local bm, bs = parse(b)
  return am < bm or (am == bm and as < bs)
end
local stream = KEYS[1]
if redis.call('EXISTS', stream) == 0 then return 0 end
local groups = redis.call('XINFO', 'GROUPS', stream)
if #groups == 0 then return 0 end
local low = nil
for _, g in ipairs(groups) do
  local name, last
  for i = 1, #g, 2 do
    if g[i] == 'name' then name = g[i + 1] elseif g[i] == 'last-delivered-id' then last = g[i + 1] end
  end
  local cand = last
  local s = redis.call('XPENDING', stream, name)
  if tonumber(s[1]) > 0 and less(s[2], cand) then cand = s[2] end
  if low == nil or less(cand, low) then low = cand end
end
if low == nil or low == '0-0' then return 0 end
return redis.call('XTRIM', stream, 'MINID', low)
`,
  },
} as const;

/** Names of the scripts, as registered on the ioredis client. */
export type ScriptName = keyof typeof scripts;

/** SHA-1 of each script (what EVALSHA names it by), derived once from the constant text. */
const shas: Readonly<Record<ScriptName, string>> = Object.freeze(
  Object.fromEntries(
    Object.entries(scripts).map(([name, s]) => [name, createHash('sha1').update(s.lua).digest('hex')]),
  ) as Record<ScriptName, string>,
);


/** ioredis has the `*Buffer` variants of EVAL/EVALSHA at run time but not in its typings. */
type BufferEvalClient = Redis & {
  evalshaBuffer(sha: string, numKeys: number, ...args: Array<string | number>): Promise<unknown>;
  evalBuffer(script: string, numKeys: number, ...args: Array<string | number>): Promise<unknown>;
};

/**
 * Runs script `name` with EVALSHA, falling back to EVAL when the server does not know it
 * (first use, or after a restart). `buffers` selects binary replies (bulk strings as Buffer).
 * @throws whatever the server or the connection throws (callers wrap it).
 */
export async function runScript(
  client: Redis,
  name: ScriptName,
  keys: readonly string[],
  args: ReadonlyArray<string | number>,
  buffers = false,
): Promise<unknown> {
  const script = scripts[name];
  const sha = shas[name];
  // Not `call('EVALSHA', ...)`: with auto-pipelining ioredis mangles generic calls.
  const c = client as BufferEvalClient;
  try {
    return buffers
      ? await c.evalshaBuffer(sha, keys.length, ...keys, ...args)
      : await client.evalsha(sha, keys.length, ...keys, ...args);
  } catch (err) {
    if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
    return buffers
      ? await c.evalBuffer(script.lua, keys.length, ...keys, ...args)
      : await client.eval(script.lua, keys.length, ...keys, ...args);
  }
}
