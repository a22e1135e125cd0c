#!/usr/bin/env bash
# Starts a standalone Apache Pulsar broker (broker + bookie + RocksDB metadata store in one
# JVM) on 127.0.0.1 for shardflow's tests, benches and laptop runs, from Maven Central jars.
#
#   scripts/pulsar/start.sh      # binary 6650, HTTP/admin/WebSocket 8080
#
# 1. Fetch (once, cached): org.apache.pulsar:pulsar-broker and pulsar-websocket at one
#    version plus a log4j2 binding, with `mvn dependency:copy-dependencies` on a generated
#    pom, into $PULSAR_HOME/lib-<version>. Every repository the Pulsar poms declare is
#    mirrored to Maven Central (the only one reachable here).
# 2. Writes $PULSAR_HOME/standalone.conf (bound to 127.0.0.1, quorum 1, WebSocket on, no
#    functions worker, no transaction coordinator, inactive-topic deletion off).
# 3. Runs `org.apache.pulsar.PulsarStandaloneStarter -c standalone.conf -nfw` in the
#    background (cwd $PULSAR_HOME, data under $PULSAR_HOME/data, logs under $PULSAR_HOME/logs)
#    and waits until GET /admin/v2/clusters lists the cluster.
#
# Idempotent: exits 0 at once when the admin API already answers on the port.
# Data survives stop.sh/start.sh (that is what the broker restart test checks); delete
# $PULSAR_HOME/data for a clean slate.
#
# Env: PULSAR_VERSION (4.0.7: 4.0.8 lacks org.apache.pulsar:jetcd-core-shaded:4.0.8 and
#      pulsar-opentelemetry:4.0.8 on the reachable Maven Central), SHARDFLOW_CACHE_DIR
#      (~/.cache/shardflow), PULSAR_HOME ($SHARDFLOW_CACHE_DIR/pulsar), PULSAR_HEAP (1g),
#      PULSAR_WEB_PORT (8080), PULSAR_BROKER_PORT (6650), PULSAR_BOOKIE_PORT (3181),
#      PULSAR_START_TIMEOUT (seconds, 300), PULSAR_FRESH (1: delete $PULSAR_HOME/data first,
#      when no broker answers; CI sets it).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../lib/java-service.sh
source "$here/../lib/java-service.sh"

version="${PULSAR_VERSION:-4.0.7}"
log4j_version="2.24.3"
home="${PULSAR_HOME:-$cache/pulsar}"
lib="$home/lib-$version"
heap="${PULSAR_HEAP:-1g}"
web_port="${PULSAR_WEB_PORT:-8080}"
broker_port="${PULSAR_BROKER_PORT:-6650}"
bookie_port="${PULSAR_BOOKIE_PORT:-3181}"
timeout="${PULSAR_START_TIMEOUT:-300}"
admin="http://127.0.0.1:$web_port/admin/v2/clusters"

log() { printf '[pulsar] %s\n' "$*" >&2; }
answers() { curl -fsS -m 5 "$admin" 2>/dev/null | grep -q '"standalone"'; }

if answers; then
  log "already answering on $admin"
  exit 0
fi
# A fresh Debian machine: Java 17, Maven and curl with apt when we are root (as
# scripts/redis/start.sh installs redis-server); otherwise say what to install.
ensure_java_tools
if [ "${PULSAR_FRESH:-0}" = 1 ]; then
  # CI: start from empty data (a fresh machine has none), so no topic, ledger or bookie
  # registration of an earlier run is in play.
  log "PULSAR_FRESH=1: removing $home/data"
  rm -rf "$home/data"
fi
mkdir -p "$home/logs" "$home/data"

# ---- 1. fetch --------------------------------------------------------------------------
fetch_maven_classpath "$home" "$version" "$cache" pulsar-broker "\
    <dependency><groupId>org.apache.pulsar</groupId><artifactId>pulsar-broker</artifactId><version>$version</version></dependency>
    <dependency><groupId>org.apache.pulsar</groupId><artifactId>pulsar-websocket</artifactId><version>$version</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId><version>$log4j_version</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$log4j_version</version></dependency>"

# ---- 2. config -------------------------------------------------------------------------
conf="$home/standalone.conf"
cat >"$conf" <<CONF
# Written by scripts/pulsar/start.sh; edits are overwritten on the next start.
clusterName=standalone
bindAddress=127.0.0.1
advertisedAddress=127.0.0.1
brokerServicePort=$broker_port
webServicePort=$web_port
webSocketServiceEnabled=true
managedLedgerDefaultEnsembleSize=1
managedLedgerDefaultWriteQuorum=1
managedLedgerDefaultAckQuorum=1
allowAutoTopicCreation=true
allowAutoTopicCreationType=non-partitioned
brokerDeleteInactiveTopicsEnabled=false
functionsWorkerEnabled=false
transactionCoordinatorEnabled=false
systemTopicEnabled=true
topicLevelPoliciesEnabled=true
authenticationEnabled=false
authorizationEnabled=false
superUserRoles=
brokerShutdownTimeoutMs=10000
managedLedgerCacheSizeMB=64
# Bookie (the in-process BKCluster reads this file too)
bookiePort=$bookie_port
allowLoopback=true
httpServerEnabled=false
journalSyncData=true
dbStorage_writeCacheMaxSizeMb=32
dbStorage_readAheadCacheMaxSizeMb=32
dbStorage_rocksDB_blockCacheSize=33554432
CONF

cat >"$home/log4j2.xml" <<XML
<Configuration status="warn">
  <Appenders>
    <RollingFile name="file" fileName="$home/logs/pulsar.log" filePattern="$home/logs/pulsar.%i.log">
      <PatternLayout pattern="%d{ISO8601} %-5level [%t] %c{1} - %msg%n"/>
      <Policies><SizeBasedTriggeringPolicy size="50 MB"/></Policies>
      <DefaultRolloverStrategy max="3"/>
    </RollingFile>
  </Appenders>
  <Loggers>
    <Root level="info"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
XML

# ---- 3. start --------------------------------------------------------------------------
cd "$home"
health="http://127.0.0.1:$web_port/admin/v2/brokers/health"
# The broker's own health check: it produces and consumes on a heartbeat topic, so it
# fails until the bookie takes writes (the admin API answers before that).
healthy() { [ "$(curl -fsS -m 30 "$health" 2>/dev/null)" = "ok" ]; }

# Starts the JVM and waits for the admin API, then for the health check (up to 120 s).
# Returns 2 when the broker answers but stays unhealthy (the caller restarts it once).
launch() {
  t0=$(now_ms)
  # The standalone starter keeps data/metadata and data/standalone/bookkeeper relative to cwd.
  setsid nohup java -Xms256m -Xmx"$heap" -XX:MaxDirectMemorySize=512m -XX:+UseG1GC \
    -Dlog4j.configurationFile="$home/log4j2.xml" \
    -Dpulsar.allocator.exit_on_oom=true -Dio.netty.recycler.maxCapacityPerThread=4096 \
    --add-opens java.base/java.io=ALL-UNNAMED --add-opens java.base/java.util.zip=ALL-UNNAMED \
    --add-opens java.base/sun.net=ALL-UNNAMED --add-opens java.management/sun.management=ALL-UNNAMED \
    --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED \
    --add-opens java.base/jdk.internal.platform=ALL-UNNAMED --add-opens java.base/java.lang=ALL-UNNAMED \
    --add-opens java.base/jdk.internal.misc=ALL-UNNAMED --add-opens java.base/java.nio=ALL-UNNAMED \
    -cp "$lib/*" org.apache.pulsar.PulsarStandaloneStarter -c "$conf" -nfw -nss \
    --bookkeeper-port "$bookie_port" \
    >"$home/logs/pulsar.out" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$home/pulsar.pid"
  deadline=$(( $(date +%s) + timeout ))
  next_dump=$(( $(date +%s) + 30 ))
  stuck=0
  until answers; do
    # Pulsar 4.0.7 can deadlock as it starts, in the JVM's class initialization: seen once in
    # CI when the broker restarted under reconnecting WebSocket consumers, a web thread in
    # Schema.<clinit> waiting for AbstractSchema while topic loading held AbstractSchema's
    # initialization and waited for Schema (a superclass/subclass initialization cycle; two
    # threads touching them first at once). Every web thread then blocks, the admin API never
    # answers, and nothing ends it. A thread dump (SIGQUIT, printed to logs/pulsar.out) that
    # shows threads waiting on class initialization twice, 15 s apart, while the admin API
    # still does not answer, restarts the broker instead of waiting out the timeout.
    if [ "$(date +%s)" -ge "$next_dump" ]; then
      next_dump=$(( $(date +%s) + 15 ))
      before=$(grep -c 'waiting on the Class initialization monitor' "$home/logs/pulsar.out" 2>/dev/null || true)
      kill -QUIT "$pid" 2>/dev/null || true
      sleep 1
      after=$(grep -c 'waiting on the Class initialization monitor' "$home/logs/pulsar.out" 2>/dev/null || true)
      if [ "${after:-0}" -gt "${before:-0}" ]; then stuck=$(( stuck + 1 )); else stuck=0; fi
      if [ "$stuck" -ge 2 ] && ! answers; then
        log "the broker is deadlocked in class initialization (threads waiting on it in two thread dumps 15 s apart; logs/pulsar.out)"
        return 3
      fi
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      log "java exited before the admin API answered; last lines of logs/pulsar.out and logs/pulsar.log:"
      tail -n 15 "$home/logs/pulsar.out" >&2 || true
      grep -E 'ERROR|Exception' "$home/logs/pulsar.log" 2>/dev/null | tail -n 15 >&2 || true
      exit 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      log "admin API not answering after ${timeout}s (pid $pid still running; see $home/logs)"
      exit 1
    fi
    sleep 0.5
  done
  deadline=$(( $(date +%s) + 120 ))
  until healthy; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      log "admin API answers but $health does not say ok after 120 s (pid $pid); last errors:"
      grep -E 'ERROR' "$home/logs/pulsar.log" 2>/dev/null | tail -n 5 | cut -c1-300 >&2 || true
      return 2
    fi
    sleep 1
  done
  log "up and healthy on 127.0.0.1:$broker_port / :$web_port (pid $pid) in $(( $(now_ms) - t0 )) ms"
}

# A standalone broker can come up with its bookie unusable (seen once: its registration lock
# on /ledgers/available invalidated and re-taken in a loop, the pattern of apache/pulsar#17759,
# and every ledger creation failing with "Not enough non-faulty bookies"); a restart on the
# same data has cleared it.
# Also restarted: a broker deadlocked as it starts (launch, above). At most three launches.
attempt=1
until launch; do
  if [ "$attempt" -ge 3 ]; then exit 1; fi
  attempt=$(( attempt + 1 ))
  log "restarting the broker (launch $attempt of 3)"
  PULSAR_HOME="$home" PULSAR_STOP_TIMEOUT=15 bash "$here/stop.sh"
done
