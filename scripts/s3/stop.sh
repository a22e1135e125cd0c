#!/usr/bin/env bash
# Stops the S3Proxy started by start.sh (SIGTERM, SIGKILL after S3_STOP_TIMEOUT seconds,
# 20). Idempotent: exits 0 when no such process runs. Its data stays in $S3_HOME/data.
set -euo pipefail
# shellcheck source=../lib/java-service.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/java-service.sh"

home="${S3_HOME:-$cache/s3proxy}"
timeout="${S3_STOP_TIMEOUT:-20}"

log() { printf '[s3] %s\n' "$*" >&2; }

stop_java_service "$home/s3proxy.pid" org.gaul.s3proxy.Main "$timeout"
