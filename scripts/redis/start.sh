#!/usr/bin/env bash
# Starts Debian's redis-server for shardflow's tests, benches and laptop runs.
#
#   scripts/redis/start.sh            # 127.0.0.1:6379, data under ~/.cache/shardflow/redis
#   REDIS_PORT=6380 scripts/redis/start.sh
#
# Idempotent: exits 0 at once when something on the port already answers PING.
# Installs the `redis-server` package with apt when it is missing and we are root.
#
# Persistence, stated so there are no surprises: append-only file on, fsync every second
# (redis' default), RDB snapshots off, data in its own directory (never the caller's cwd).
# `stop.sh` shuts down with SHUTDOWN, which fsyncs the AOF first, so a stop/start loses
# nothing; a kill -9 may lose the last second of writes.
#
# Env: REDIS_PORT (6379), REDIS_DIR (${SHARDFLOW_CACHE_DIR:-~/.cache/shardflow}/redis-<port>),
#      REDIS_START_TIMEOUT (seconds, 20).
set -euo pipefail

port="${REDIS_PORT:-6379}"
cache="${SHARDFLOW_CACHE_DIR:-${HOME:-/root}/.cache/shardflow}"
dir="${REDIS_DIR:-$cache/redis-$port}"
timeout="${REDIS_START_TIMEOUT:-20}"

log() { printf '[redis] %s\n' "$*" >&2; }

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    log "redis-server is not installed and we are not root: apt-get install redis-server"
    exit 1
  fi
  log "installing redis-server with apt"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends redis-server >/dev/null
  # Debian's package may start its own service on 6379 where an init system runs; ours
  # takes over only if nothing answers below.
fi

ping() { [ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = "PONG" ]; }

if ping; then
  log "already answering on 127.0.0.1:$port"
  exit 0
fi

mkdir -p "$dir"
conf="$dir/redis.conf"
cat >"$conf" <<CONF
bind 127.0.0.1
port $port
protected-mode yes
daemonize yes
pidfile $dir/redis.pid
logfile $dir/redis.log
dir $dir
save ""
appendonly yes
appendfilename "appendonly.aof"
appendfsync everysec
stop-writes-on-bgsave-error no
maxmemory-policy noeviction
CONF

started=$(date +%s%N)
redis-server "$conf"
deadline=$(( $(date +%s) + timeout ))
until ping; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    log "no PONG on 127.0.0.1:$port after ${timeout}s; last log lines:"
    tail -n 20 "$dir/redis.log" >&2 || true
    exit 1
  fi
  sleep 0.05
done
log "up on 127.0.0.1:$port in $(( ($(date +%s%N) - started) / 1000000 )) ms (dir $dir)"
