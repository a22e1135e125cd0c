# Sourced by scripts/pulsar/*.sh and scripts/s3/*.sh: what a Java service run from Maven
# Central jars needs. Each function reports through the caller's `log` function.

# The download and data cache every service script shares (SHARDFLOW_CACHE_DIR, default
# ~/.cache/shardflow): a service's home defaults to $cache/<service>.
cache="${SHARDFLOW_CACHE_DIR:-${HOME:-/root}/.cache/shardflow}"

# Milliseconds since the epoch (for start-up times in the logs).
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# Java 17, Maven and curl: installed with apt when one is missing and we are root (a fresh
# Debian machine); otherwise exits 1 saying what to install.
ensure_java_tools() {
  if ! command -v java >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
      log "installing Java 17, Maven and curl with apt"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless maven curl >/dev/null
    fi
  fi
  local tool
  for tool in java mvn curl; do
    command -v "$tool" >/dev/null 2>&1 || { log "$tool is required (Java 17, Maven 3.8+, curl): apt-get install openjdk-17-jre-headless maven curl"; exit 1; }
  done
}

# fetch_maven_classpath HOME VERSION CACHE WHAT DEPENDENCIES
# Once (HOME/lib-VERSION/.complete marks it done): `mvn dependency:copy-dependencies` of a
# generated pom whose <dependencies> are DEPENDENCIES (XML), runtime scope, into
# HOME/lib-VERSION, with the local repository CACHE/m2 and every repository mirrored to
# Maven Central (the only one reachable here). WHAT names it in the log; the Maven output
# goes to HOME/logs/fetch.log. Exits 1 when the fetch fails.
fetch_maven_classpath() {
  local home=$1 version=$2 cache=$3 what=$4 deps=$5
  local lib="$home/lib-$version" fetch="$home/fetch-$version" t0
  [ -f "$lib/.complete" ] && return 0
  t0=$(( $(date +%s%N) / 1000000 ))
  mkdir -p "$fetch" "$home/logs"
  cat >"$fetch/settings.xml" <<XML
<settings>
  <localRepository>$cache/m2</localRepository>
  <mirrors>
    <mirror><id>central-only</id><mirrorOf>*</mirrorOf><url>https://repo.maven.apache.org/maven2</url></mirror>
  </mirrors>
</settings>
XML
  cat >"$fetch/pom.xml" <<XML
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>shardflow.local</groupId>
  <artifactId>classpath</artifactId>
  <version>$version</version>
  <packaging>pom</packaging>
  <dependencies>
$deps
  </dependencies>
</project>
XML
  log "fetching $what $version and its dependencies from Maven Central (first run only)"
  rm -rf "$lib.tmp"
  if ! mvn -B -q -f "$fetch/pom.xml" -s "$fetch/settings.xml" \
      dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$lib.tmp" \
      >"$home/logs/fetch.log" 2>&1; then
    log "fetch failed; see $home/logs/fetch.log:"
    grep -E 'ERROR' "$home/logs/fetch.log" | head -n 5 >&2 || true
    exit 1
  fi
  rm -rf "$lib"
  mv "$lib.tmp" "$lib"
  touch "$lib/.complete"
  log "fetched $(ls "$lib" | wc -l) jars ($(du -sh "$lib" | cut -f1)) in $(( $(date +%s%N) / 1000000 - t0 )) ms"
}

# stop_java_service PIDFILE MAIN_CLASS TIMEOUT
# SIGTERM to the pid in PIDFILE when that process runs MAIN_CLASS, SIGKILL after TIMEOUT
# seconds; removes PIDFILE. Returns 0 when no such process runs.
stop_java_service() {
  local pidfile=$1 main=$2 timeout=$3 pid="" t0 deadline
  [ -f "$pidfile" ] && pid="$(cat "$pidfile")"
  if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null \
      || ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "$main"; then
    log "not running"
    rm -f "$pidfile"
    return 0
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
}
