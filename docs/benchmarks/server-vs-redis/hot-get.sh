#!/usr/bin/env bash
# The per-request cost of GET without the value reads: 1,000 keys of 8 KiB (all in Gleaner's
# memtable, all in Redis's memory), then 1,000,000 pipelined GETs. SERVER: redis or everysec.
# Prints the GET rate and the server's CPU per GET (from /proc, in microseconds). Run from the
# repository root after `cargo build --release -p gleaner-server`.
set -euo pipefail
source "$(dirname "$0")/server.sh"
which=$1
base=${WORK:-/tmp/gleaner-server-bench}/hot-$which; rm -rf "$base"; mkdir -p "$base"; port=6397
start_server "$which" "$base" $port
redis-benchmark -p $port -t set -d 8192 -P 16 -c 32 -n 100000 -r 1000 --csv >/dev/null
sleep 5
t1=$(awk '{print $14+$15}' /proc/$pid/stat)
g=$(redis-benchmark -p $port -t get -d 8192 -P 16 -c 32 -n 1000000 -r 1000 --csv | grep '^"GET"' | cut -d, -f2 | tr -d '"')
t2=$(awk '{print $14+$15}' /proc/$pid/stat)
kill -TERM $pid; wait $pid || true
rm -rf "$base"
# /proc counts CPU in ticks of 10 ms.
echo "$which,$g,$(( (t2 - t1) * 10000 / 1000000 ))"
