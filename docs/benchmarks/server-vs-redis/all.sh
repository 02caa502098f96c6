#!/usr/bin/env bash
# All runs of docs/benchmarks.md "gleaner-server against Redis", alternating servers, two
# repetitions; skipped while a gleaner-bench runs. 8 KiB values (the figure with a target), then
# 100-byte and 64 KiB values (figures only), each server with the same shape.
echo "server,rep,d,set_ops_per_s,get_ops_per_s,keys,rss_mib,peak_rss_mib,disk_mib"
run() {
  if pgrep -f "target/release/gleaner-bench" >/dev/null; then echo "skipped,$1,$2"; return; fi
  docs/benchmarks/server-vs-redis/run.sh "$1" "$2"
}
for rep in 1 2; do
  for m in redis everysec batch; do D=8192 N=500000 R=100000 run $m $rep; done
  for m in redis everysec; do D=100 N=1000000 R=100000 run $m $rep; done
  for m in redis everysec; do D=65536 N=100000 R=20000 run $m $rep; done
done
