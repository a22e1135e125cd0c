#!/usr/bin/env bash
# Stops the S3Proxy started by start.sh (SIGTERM, SIGKILL after S3_STOP_TIMEOUT seconds,
# 20). Idempotent: exits 0 when no such process runs. Its data stays in $S3_HOME/data.
set -euo pipefail

cache="${SHARDFLOW_CACHE_DIR:-${HOME:-/root}/.cache/shardflow}"
home="${S3_HOME:-$cache/s3proxy}"
timeout="${S3_STOP_TIMEOUT:-20}"
pidfile="$home/s3proxy.pid"

log() { printf '[s3] %s\n' "$*" >&2; }

pid=""
[ -f "$pidfile" ] && pid="$(cat "$pidfile")"
if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null \
    || ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q org.gaul.s3proxy.Main; then
  log "not running"
  rm -f "$pidfile"
  exit 0
fi
t0=$(date +%s%N)
kill -TERM "$pid"
deadline=$(( $(date +%s) + timeout ))
while kill -0 "$pid" 2>/dev/null; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    log "still running after ${timeout}s: SIGKILL $pid"
    kill -KILL "$pid" 2>/dev/null || true
    break
  fi
  sleep 0.2
done
rm -f "$pidfile"
log "stopped pid $pid in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
