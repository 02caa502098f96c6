#!/usr/bin/env bash
# The 8 KiB runs of docs/benchmarks.md "gleaner-server against Redis with Redis's memory: the
# row cache", servers alternating, REPS repetitions (default 3): Redis (AOF, fsync every
# second), gleaner-server `--sync everysec` with default options, and with no more memory than
# Redis holds this data in (MEMORY_ARGS, default a 720 MiB row cache which writes fill; the
# earlier "GET with Redis's memory" runs set `--option block_cache_size=1GiB --option
# prepopulate_value_cache=true`). Prints run.sh's CSV lines, the first column naming the
# setting. Run from the repository root after `cargo build --release -p gleaner-server`.
set -euo pipefail
reps=${REPS:-3}
memory_args=${MEMORY_ARGS:-"--option row_cache_size=720MiB --option prepopulate_row_cache=true"}
export D=8192 N=500000 R=100000
echo "setting,server,rep,d,set_ops_per_s,get_ops_per_s,keys,rss_mib,peak_rss_mib,disk_mib"
for rep in $(seq 1 "$reps"); do
  echo "redis,$(docs/benchmarks/server-vs-redis/run.sh redis "$rep")"
  echo "default,$(SERVER_ARGS="" docs/benchmarks/server-vs-redis/run.sh everysec "$rep")"
  echo "memory,$(SERVER_ARGS="$memory_args" docs/benchmarks/server-vs-redis/run.sh everysec "$rep")"
done
