#!/usr/bin/env bash
# Server CPU time per operation, docs/benchmarks.md "gleaner-server against Redis: GET after two
# read-path changes": SERVER (redis, or a gleaner-server --sync mode), then the N SETs of D bytes
# over R keys, SETTLE seconds of quiet (default 0: the GETs start straight after, background
# work finishing meanwhile counts), and N GETs. Prints the rates and the server's user+system CPU
# microseconds per SET and per GET (from /proc/PID/stat; clock ticks of 10 ms). Run from the
# repository root after `cargo build --release -p gleaner-server`.
set -euo pipefail
source "$(dirname "$0")/server.sh"
which=$1
N=${N:-500000}; R=${R:-100000}; D=${D:-8192}; SETTLE=${SETTLE:-0}
base=${WORK:-/tmp/gleaner-server-bench}/cpu-$which-$D
rm -rf "$base"; mkdir -p "$base"
port=6391
start_server "$which" "$base" $port
ticks() { awk '{print $14 + $15}' /proc/$pid/stat; }
rate() { grep "^\"$1\"" | cut -d, -f2 | tr -d '"'; }
t0=$(ticks)
set_ops=$(redis-benchmark -p $port -t set -d "$D" -P 16 -c 32 -n "$N" -r "$R" --csv | rate SET)
t1=$(ticks)
sleep "$SETTLE"
t2=$(ticks)
get_ops=$(redis-benchmark -p $port -t get -d "$D" -P 16 -c 32 -n "$N" -r "$R" --csv | rate GET)
t3=$(ticks)
kill -TERM $pid; wait $pid || true
rm -rf "$base"
echo "$which,$D,$set_ops,$(( (t1 - t0) * 10000 / N )),$get_ops,$(( (t3 - t2) * 10000 / N ))"
