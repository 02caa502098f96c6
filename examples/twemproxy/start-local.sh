#!/usr/bin/env bash
# Starts three gleaner-server instances (ports 6381-6383, databases under ./data) and
# nutcracker on 127.0.0.1:22121 with nutcracker.yml, all on loopback; Ctrl-C stops them all
# (the servers close their databases cleanly on the SIGTERM they get).
#
#   cargo build --release -p gleaner-server
#   examples/twemproxy/start-local.sh            # in another terminal:
#   redis-cli -p 22121 set hello world
#
# Environment: GLEANER_SERVER (default target/release/gleaner-server), DATA (default ./data).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
server=${GLEANER_SERVER:-target/release/gleaner-server}
data=${DATA:-./data}
pids=()
stop() {
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait
}
trap stop EXIT INT TERM
for n in 1 2 3; do
  "$server" "$data/gleaner$n" --bind "127.0.0.1:638$n" &
  pids+=($!)
done
# Wait (bounded) until every server accepts connections before starting the proxy.
for n in 1 2 3; do
  for _ in $(seq 1 300); do
    redis-cli -p "638$n" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
done
nutcracker -c "$here/nutcracker.yml" -a 127.0.0.1 -s 22222 -p "$data/nutcracker.pid" \
  -o "$data/nutcracker.log" &
pids+=($!)
echo "twemproxy on 127.0.0.1:22121 in front of gleaner-server on 6381, 6382, 6383; Ctrl-C stops"
wait
