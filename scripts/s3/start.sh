#!/usr/bin/env bash
# Starts S3Proxy (org.gaul:s3proxy from Maven Central, on Java) with its filesystem backend
# on 127.0.0.1: a real S3 server for shardflow's S3 checkpoint store tests, benches and
# laptop runs (src/checkpoint/, docs/checkpoints.md). It speaks the S3 REST API with AWS
# signature v2/v4 and keeps each bucket as a directory, each object as a file.
#
#   scripts/s3/start.sh       # http://127.0.0.1:9000, bucket `shardflow`
#
# 1. Fetch (once, cached): org.gaul:s3proxy and its dependencies with
#    `mvn dependency:copy-dependencies` on a generated pom (Maven Central only), into
#    $S3_HOME/lib-<version>. Java 17, Maven and curl are installed with apt when missing
#    and we are root (scripts/lib/java-service.sh, shared with scripts/pulsar/start.sh).
# 2. Writes $S3_HOME/s3proxy.conf (endpoint, credentials, filesystem backend under
#    $S3_HOME/data) and a logback config (INFO to $S3_HOME/logs/s3proxy.log).
# 3. Creates the bucket $S3_BUCKET (a directory of the backend), runs
#    `org.gaul.s3proxy.Main` in the background and waits until it answers S3 requests.
#
# Idempotent: exits 0 at once when an S3 server already answers on the port. Prints the
# environment a client needs on stdout (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
# AWS_SECRET_ACCESS_KEY, AWS_REGION: `eval "$(scripts/s3/start.sh)"`); the tests and the
# checkpoint bench use the same values when those variables are unset.
# Data survives stop.sh/start.sh; S3_FRESH=1 deletes $S3_HOME/data first (when none answers).
#
# Env: S3PROXY_VERSION (2.6.0), SHARDFLOW_CACHE_DIR (~/.cache/shardflow), S3_HOME
#      ($SHARDFLOW_CACHE_DIR/s3proxy), S3_PORT (9000), S3_BUCKET (shardflow),
#      S3_ACCESS_KEY (shardflow), S3_SECRET_KEY (shardflow-secret), S3_HEAP (256m),
#      S3_START_TIMEOUT (seconds, 60), S3_FRESH.
set -euo pipefail
# shellcheck source=../lib/java-service.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/java-service.sh"

version="${S3PROXY_VERSION:-2.6.0}"
home="${S3_HOME:-$cache/s3proxy}"
lib="$home/lib-$version"
port="${S3_PORT:-9000}"
bucket="${S3_BUCKET:-shardflow}"
access_key="${S3_ACCESS_KEY:-shardflow}"
secret_key="${S3_SECRET_KEY:-shardflow-secret}"
heap="${S3_HEAP:-256m}"
timeout="${S3_START_TIMEOUT:-60}"
endpoint="http://127.0.0.1:$port"

log() { printf '[s3] %s\n' "$*" >&2; }
# An S3 server answers an unsigned request with an S3 error document and a request id.
answers() { curl -sS -m 5 -D - -o /dev/null "$endpoint/" 2>/dev/null | grep -qi '^x-amz-request-id:'; }
client_env() {
  printf 'export AWS_ENDPOINT_URL=%s AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s AWS_REGION=us-east-1\n' \
    "$endpoint" "$access_key" "$secret_key"
}

if answers; then
  log "already answering on $endpoint"
  client_env
  exit 0
fi
ensure_java_tools
if [ "${S3_FRESH:-0}" = 1 ]; then
  log "S3_FRESH=1: removing $home/data"
  rm -rf "$home/data"
fi
mkdir -p "$home/logs" "$home/data/$bucket"

# ---- 1. fetch --------------------------------------------------------------------------
fetch_maven_classpath "$home" "$version" "$cache" s3proxy \
  "    <dependency><groupId>org.gaul</groupId><artifactId>s3proxy</artifactId><version>$version</version></dependency>"

# ---- 2. config -------------------------------------------------------------------------
conf="$home/s3proxy.conf"
cat >"$conf" <<CONF
# Written by scripts/s3/start.sh; edits are overwritten on the next start.
s3proxy.endpoint=$endpoint
s3proxy.authorization=aws-v2-or-v4
s3proxy.identity=$access_key
s3proxy.credential=$secret_key
jclouds.provider=filesystem
jclouds.filesystem.basedir=$home/data
CONF
cat >"$home/logback.xml" <<XML
<configuration>
  <appender name="file" class="ch.qos.logback.core.FileAppender">
    <file>$home/logs/s3proxy.log</file>
    <encoder><pattern>%d{ISO8601} %-5level [%thread] %logger{1} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="file"/></root>
</configuration>
XML

# ---- 3. start --------------------------------------------------------------------------
t0=$(now_ms)
cd "$home"
setsid nohup java -Xms64m -Xmx"$heap" -XX:+UseSerialGC -Dlogback.configurationFile="$home/logback.xml" \
  -cp "$lib/*" org.gaul.s3proxy.Main --properties "$conf" \
  >"$home/logs/s3proxy.out" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$home/s3proxy.pid"
deadline=$(( $(date +%s) + timeout ))
until answers; do
  if ! kill -0 "$pid" 2>/dev/null; then
    log "java exited before S3Proxy answered; last lines of logs/s3proxy.out:"
    tail -n 15 "$home/logs/s3proxy.out" >&2 || true
    exit 1
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    log "S3Proxy not answering on $endpoint after ${timeout}s (pid $pid still running; see $home/logs)"
    exit 1
  fi
  sleep 0.3
done
log "up on $endpoint (pid $pid, bucket $bucket, data $home/data) in $(( $(now_ms) - t0 )) ms"
client_env
