# Sourced by the scripts beside it: start_server SERVER DIR PORT starts redis (AOF, fsync every
# second) or gleaner-server with `--sync SERVER` on 127.0.0.1:PORT with its data in DIR, sets
# `pid`, and returns once the server answers PING (within 30 s). GLEANER_SERVER names another
# gleaner-server binary (default target/release/gleaner-server, e.g. a build of an older commit
# to compare), SERVER_ARGS adds arguments to its command line (e.g. `--option
# block_cache_size=1GiB`).
start_server() {
  local which=$1 dir=$2 port=$3
  if [ "$which" = redis ]; then
    redis-server --port "$port" --bind 127.0.0.1 --appendonly yes --appendfsync everysec \
      --save "" --dir "$dir" --daemonize no --logfile "$dir/redis.log" &
  else
    # shellcheck disable=SC2086 # SERVER_ARGS is a list of words
    "${GLEANER_SERVER:-target/release/gleaner-server}" "$dir/db" --bind "127.0.0.1:$port" \
      --sync "$which" ${SERVER_ARGS:-} 2>"$dir/server.log" &
  fi
  pid=$!
  for _ in $(seq 1 300); do redis-cli -p "$port" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "server $which did not answer on port $port within 30 s" >&2
  return 1
}
