#!/usr/bin/env bash
# One run of docs/benchmarks.md "gleaner-server against Redis": SERVER (redis, or a --sync mode:
# batch, everysec, no, always) and a repetition number; the value size D (default 8192), the
# request count N and the key range R from the environment. Run from the repository root after
# `cargo build --release -p gleaner-server`. Prints one CSV line:
# server,rep,d,set_ops,get_ops,keys,rss_mib,peak_rss_mib,disk_mib
set -euo pipefail
source "$(dirname "$0")/server.sh"
which=$1; rep=$2
N=${N:-500000}; R=${R:-100000}; D=${D:-8192}
base=${WORK:-/tmp/gleaner-server-bench}/run-$which-$D-$rep
rm -rf "$base"; mkdir -p "$base"
port=6390
start_server "$which" "$base" $port
redis-benchmark -p $port -t set,get -d "$D" -P 16 -c 32 -n "$N" -r "$R" --csv > "$base/bench.csv"
keys=$(redis-cli -p $port dbsize)
if [ "$which" != redis ]; then keys=$(redis-cli -p $port --scan | wc -l); fi
rss=$(awk '/VmRSS/{print int($2/1024)}' /proc/$pid/status)
hwm=$(awk '/VmHWM/{print int($2/1024)}' /proc/$pid/status)
disk=$(du -sm "$base" | cut -f1)
set_ops=$(grep '^"SET"' "$base/bench.csv" | cut -d, -f2 | tr -d '"')
get_ops=$(grep '^"GET"' "$base/bench.csv" | cut -d, -f2 | tr -d '"')
kill -TERM $pid; wait $pid || true
rm -rf "$base"
echo "$which,$rep,$D,$set_ops,$get_ops,$keys,$rss,$hwm,$disk"
