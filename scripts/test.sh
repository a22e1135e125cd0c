#!/usr/bin/env bash
# `npm test`: every test file, in two lanes at once. The in-process unit files (no child
# processes, no SIGKILLs, no leases: storage, streams, the framework's in-process
# topologies, ...) run in one lane while the files that start processes, brokers' clients,
# crawls and clusters run one at a time in the other: on a 2-core machine the second lane
# mostly waits (leases, timers, child processes), and the suite took close to CI's 90 minutes
# in one lane on a slow one. Each lane runs its files one at a time (`--test-concurrency=1`).
# Exit status: non-zero when either lane failed.
set -uo pipefail
cd "$(dirname "$0")/.."
# The CLI processes the tests start run the compiled dist/ while it is current
# (bin/shardflow.mjs): rebuild it first when a source is newer.
node scripts/build.mjs --if-stale || exit 1
unit=()
rest=()
for f in test/*.test.ts; do
  case "$(basename "$f")" in
    architecture.*|framework.*|stream.*|messages.*|gc.*|consumer.*|storage.*|runtime.*|supervision.*)
      if grep -qE 'spawn|execFile|fork\(' "$f"; then rest+=("$f"); else unit+=("$f"); fi ;;
    *) rest+=("$f") ;;
  esac
done
# (`node --test` without files would discover every test file: both lists must hold some.)
if [ "${#unit[@]}" -eq 0 ] || [ "${#rest[@]}" -eq 0 ]; then
  echo "scripts/test.sh: a lane has no files (unit ${#unit[@]}, other ${#rest[@]})" >&2
  exit 1
fi
node --import tsx --test --test-concurrency=1 "${unit[@]}" > >(sed -u 's/^/[unit] /') 2>&1 &
unit_pid=$!
node --import tsx --test --test-concurrency=1 "${rest[@]}"
rest_status=$?
wait "$unit_pid"
unit_status=$?
echo "# unit lane (${#unit[@]} files): exit ${unit_status}; other lane (${#rest[@]} files): exit ${rest_status}"
[ "$unit_status" -eq 0 ] && [ "$rest_status" -eq 0 ]
