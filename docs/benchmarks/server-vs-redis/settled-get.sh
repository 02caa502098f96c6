#!/usr/bin/env bash
# GETs over one settled database, servers alternating (docs/benchmarks.md, "gleaner-server
# against Redis: GET with a memtable key filter, slot-held cache entries and mimalloc"):
# `settled-get.sh REPS BINARY...` loads SETS SETs (default 500,000) of D bytes over R keys
# once with the first gleaner-server binary named, waits 15 s, stops it; then REPS times, for
# each binary, starts it on a fresh copy of that database, sends WARM GETs (default 300,000; 0
# for none: cold caches) and measures N GETs. Prints `binary rate cpu-microseconds-per-GET`
# lines (CPU from /proc/PID/stat, clock ticks of 10 ms). SERVER_ARGS applies to every server.
# Needs a free port 6395 and redis-benchmark; run from the repository root.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 REPS GLEANER_SERVER_BINARY..." >&2
  exit 2
fi
source "$(dirname "$0")/server.sh"
reps=$1; shift
N=${N:-1000000}; R=${R:-100000}; D=${D:-8192}; WARM=${WARM:-300000}; SETS=${SETS:-500000}
work=${WORK:-/tmp/gleaner-server-bench}/settled
rm -rf "$work"; mkdir -p "$work/seed"
port=6395
pid=
# A failed step leaves no server holding the port.
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null || true' EXIT
GLEANER_SERVER=$1 start_server everysec "$work/seed" $port
redis-benchmark -p $port -t set -d "$D" -P 16 -c 32 -n "$SETS" -r "$R" --csv >/dev/null
sleep 15
kill -TERM "$pid"; wait "$pid" || true; pid=
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
for _ in $(seq 1 "$reps"); do
  for bin in "$@"; do
    rm -rf "$work/run"; cp -a "$work/seed" "$work/run"
    GLEANER_SERVER=$bin start_server everysec "$work/run" $port
    if [ "$WARM" -gt 0 ]; then
      redis-benchmark -p $port -t get -d "$D" -P 16 -c 32 -n "$WARM" -r "$R" --csv >/dev/null
    fi
    t0=$(ticks)
    rate=$(redis-benchmark -p $port -t get -d "$D" -P 16 -c 32 -n "$N" -r "$R" --csv |
      grep '^"GET"' | cut -d, -f2 | tr -d '"')
    t1=$(ticks)
    kill -TERM "$pid"; wait "$pid" || true; pid=
    echo "$bin $rate $(( (t1 - t0) * 10000 / N )).$(( (t1 - t0) * 100000 / N % 10 ))"
  done
done
rm -rf "$work"
