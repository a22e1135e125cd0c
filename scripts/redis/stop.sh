#!/usr/bin/env bash
# Stops the redis-server that start.sh started (same REDIS_PORT / REDIS_DIR defaults).
# SHUTDOWN fsyncs the append-only file first, so nothing acknowledged is lost.
# Idempotent: exits 0 when nothing answers on the port.
set -euo pipefail

port="${REDIS_PORT:-6379}"
cache="${SHARDFLOW_CACHE_DIR:-${HOME:-/root}/.cache/shardflow}"
dir="${REDIS_DIR:-$cache/redis-$port}"
timeout="${REDIS_STOP_TIMEOUT:-20}"

log() { printf '[redis] %s\n' "$*" >&2; }
ping() { [ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = "PONG" ]; }

if ! ping; then
  log "nothing answering on 127.0.0.1:$port"
  exit 0
fi
pid=""
[ -f "$dir/redis.pid" ] && pid="$(cat "$dir/redis.pid")"
redis-cli -h 127.0.0.1 -p "$port" shutdown >/dev/null 2>&1 || true
deadline=$(( $(date +%s) + timeout ))
while ping || { [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; }; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    log "still running after ${timeout}s${pid:+; sending SIGTERM to $pid}"
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    exit 1
  fi
  sleep 0.05
done
log "stopped 127.0.0.1:$port"
