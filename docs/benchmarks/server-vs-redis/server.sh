# Sourced by the scripts beside it: start_server SERVER DIR PORT starts redis (AOF, fsync every
# second) or gleaner-server with `--sync SERVER` on 127.0.0.1:PORT with its data in DIR, sets
# `pid`, and returns once the server answers PING (within 30 s).
start_server() {
  local which=$1 dir=$2 port=$3
  if [ "$which" = redis ]; then
    redis-server --port "$port" --bind 127.0.0.1 --appendonly yes --appendfsync everysec \
      --save "" --dir "$dir" --daemonize no --logfile "$dir/redis.log" &
  else
    target/release/gleaner-server "$dir/db" --bind "127.0.0.1:$port" --sync "$which" \
      2>"$dir/server.log" &
  fi
  pid=$!
  for _ in $(seq 1 300); do redis-cli -p "$port" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "server $which did not answer on port $port within 30 s" >&2
  return 1
}
