#!/usr/bin/env bash
# All runs, alternating engines, two repetitions; skipped while a gleaner-bench runs.
for rep in 1 2; do
  for m in redis batch no always; do
    if pgrep -f "target/release/gleaner-bench" >/dev/null; then echo "skipped,$m,$rep (gleaner-bench running)"; continue; fi
    docs/benchmarks/server-vs-redis/run.sh $m $rep
  done
done
