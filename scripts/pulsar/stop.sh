#!/usr/bin/env bash
# Stops the standalone Pulsar started by start.sh: SIGTERM (the broker closes topics and
# the bookie flushes its journal), SIGKILL after PULSAR_STOP_TIMEOUT seconds (60).
# Idempotent: exits 0 when no such process runs.
set -euo pipefail
# shellcheck source=../lib/java-service.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/java-service.sh"

home="${PULSAR_HOME:-$cache/pulsar}"
timeout="${PULSAR_STOP_TIMEOUT:-60}"
pidfile="$home/pulsar.pid"

log() { printf '[pulsar] %s\n' "$*" >&2; }

stop_java_service "$pidfile" PulsarStandaloneStarter "$timeout"
