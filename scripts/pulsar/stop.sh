#!/usr/bin/env bash
# Stops the standalone Pulsar started by start.sh: SIGTERM (the broker closes topics and
# the bookie flushes its journal), SIGKILL after PULSAR_STOP_TIMEOUT seconds (60).
# Idempotent: exits 0 when no such process runs.
set -euo pipefail

cache="${SHARDFLOW_CACHE_DIR:-${HOME:-/root}/.cache/shardflow}"
home="${PULSAR_HOME:-$cache/pulsar}"
timeout="${PULSAR_STOP_TIMEOUT:-60}"
pidfile="$home/pulsar.pid"

log() { printf '[pulsar] %s\n' "$*" >&2; }

pid=""
[ -f "$pidfile" ] && pid="$(cat "$pidfile")"
if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null \
    || ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q PulsarStandaloneStarter; then
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
