#!/usr/bin/env bash
# A single-node Apache Kafka 4.4 broker (KRaft, controller and broker in one process) on
# 127.0.0.1, for partlog's broker tests. The Rust tests use tests/common/broker.rs, which does the
# same with the same files (server.properties.in, jvm.options); this script serves run.sh and
# tests/fixtures/broker/make.sh.
#
#   broker.sh start WORK [LOG_DIR]   # format LOG_DIR (default WORK/logs) if new, start, wait until
#                                    # ready; prints the bootstrap address (127.0.0.1:PORT)
#   broker.sh stop WORK              # SIGTERM (Kafka's clean shutdown), then SIGKILL after 60 s
#   broker.sh kill WORK              # SIGKILL: an unclean shutdown
#   broker.sh bootstrap WORK         # prints 127.0.0.1:PORT
#   broker.sh log WORK               # prints the path of the current server log
#
# WORK keeps the broker's state between calls: server.properties, ports (reused by a restart, so
# the metadata log's voter address stays valid), broker.pid, and server-N.log for the N-th start
# (Kafka's log at info: stdout and stderr of the JVM).
#
# Java and Kafka's jars, first match wins (as in tests/common/kafka.rs): $PARTLOG_JAVA or `java`;
# $PARTLOG_KAFKA_CLASSPATH, else $PARTLOG_CACHE/kafka-classpath.txt (default
# ~/.cache/partlog), else .ci/kafka-classpath.sh resolves it with Maven.
#
# Every wait is bounded: PARTLOG_BROKER_READY_TIMEOUT (default 120 s) for start,
# PARTLOG_BROKER_STOP_TIMEOUT (default 60 s) before stop escalates to SIGKILL.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
ready_timeout="${PARTLOG_BROKER_READY_TIMEOUT:-120}"
stop_timeout="${PARTLOG_BROKER_STOP_TIMEOUT:-60}"
# Kafka's cluster id is 16 bytes in unpadded base64url; these spell "partlog-tests-01", so every
# test cluster has the same, recognisable id.
cluster_id="cGFydGxvZy10ZXN0cy0wMQ"

die() { echo "broker.sh: $*" >&2; exit 1; }

java_bin() { echo "${PARTLOG_JAVA:-java}"; }

classpath() {
  if [ -n "${PARTLOG_KAFKA_CLASSPATH:-}" ]; then
    echo "$PARTLOG_KAFKA_CLASSPATH"
    return
  fi
  local file="${PARTLOG_CACHE:-$HOME/.cache/partlog}/kafka-classpath.txt"
  [ -s "$file" ] || file="$(bash "$repo/.ci/kafka-classpath.sh")"
  cat "$file"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

pid_alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

current_pid() { cat "$1/broker.pid" 2>/dev/null || true; }

current_log() {
  local starts
  starts="$(cat "$1/starts" 2>/dev/null || echo 0)"
  echo "$1/server-$starts.log"
}

# answers PORT: whether the broker answers an ApiVersions request on 127.0.0.1:PORT.
answers() {
  python3 - "$1" <<'EOF'
import socket, struct, sys
# ApiVersions v0: header v1 (api key 18, version 0, correlation id 7, client id "probe"), no body.
request = struct.pack(">hhih", 18, 0, 7, 5) + b"probe"
try:
    with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5) as sock:
        sock.settimeout(5)
        sock.sendall(struct.pack(">i", len(request)) + request)
        header = b""
        while len(header) < 10:
            chunk = sock.recv(10 - len(header))
            if not chunk:
                sys.exit(1)
            header += chunk
        _size, correlation, error = struct.unpack(">iih", header)
        sys.exit(0 if correlation == 7 and error == 0 else 1)
except OSError:
    sys.exit(1)
EOF
}

start() {
  local work="$1" log_dir="${2:-$1/logs}"
  mkdir -p "$work" "$log_dir"
  work="$(cd "$work" && pwd)"
  log_dir="$(cd "$log_dir" && pwd)"
  local pid
  pid="$(current_pid "$work")"
  pid_alive "$pid" && die "a broker is already running from $work (pid $pid)"

  local broker_port controller_port
  if [ -s "$work/ports" ]; then
    read -r broker_port controller_port <"$work/ports"
  else
    broker_port="$(free_port)"
    controller_port="$(free_port)"
    while [ "$controller_port" = "$broker_port" ]; do controller_port="$(free_port)"; done
    echo "$broker_port $controller_port" >"$work/ports"
  fi
  sed -e "s|@BROKER_PORT@|$broker_port|g" -e "s|@CONTROLLER_PORT@|$controller_port|g" \
    -e "s|@LOG_DIR@|$log_dir|g" "$here/server.properties.in" >"$work/server.properties"

  local java cp
  java="$(java_bin)"
  cp="$(classpath)"
  if [ ! -f "$log_dir/meta.properties" ]; then
    timeout 120 "$java" "@$here/jvm.options" -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
      -cp "$cp" kafka.tools.StorageTool format --cluster-id "$cluster_id" \
      --config "$work/server.properties" >"$work/format.log" 2>&1 ||
      { cat "$work/format.log" >&2; die "formatting $log_dir failed"; }
  fi

  local starts log
  starts=$(($(cat "$work/starts" 2>/dev/null || echo 0) + 1))
  echo "$starts" >"$work/starts"
  log="$work/server-$starts.log"
  "$java" "@$here/jvm.options" -cp "$cp" kafka.Kafka "$work/server.properties" \
    </dev/null >"$log" 2>&1 &
  pid=$!
  echo "$pid" >"$work/broker.pid"

  local deadline=$(($(date +%s) + ready_timeout))
  until grep -q 'Kafka Server started' "$log" && answers "$broker_port"; do
    if ! pid_alive "$pid"; then
      tail -n 40 "$log" >&2
      die "the broker exited during startup (log: $log)"
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      kill -KILL "$pid" 2>/dev/null || true
      tail -n 40 "$log" >&2
      die "the broker was not ready within ${ready_timeout}s (log: $log)"
    fi
    sleep 0.2
  done
  echo "127.0.0.1:$broker_port"
}

# wait_gone PID SECONDS: whether PID exited within SECONDS.
wait_gone() {
  local deadline=$(($(date +%s) + $2))
  while pid_alive "$1"; do
    [ "$(date +%s)" -ge "$deadline" ] && return 1
    sleep 0.1
  done
}

stop() {
  local work="$1" pid
  pid="$(current_pid "$work")"
  if ! pid_alive "$pid"; then
    rm -f "$work/broker.pid"
    return 0
  fi
  kill -TERM "$pid"
  if ! wait_gone "$pid" "$stop_timeout"; then
    echo "broker.sh: no clean shutdown within ${stop_timeout}s; sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" 30 || die "pid $pid survived SIGKILL"
    rm -f "$work/broker.pid"
    return 1
  fi
  rm -f "$work/broker.pid"
}

kill_broker() {
  local work="$1" pid
  pid="$(current_pid "$work")"
  if pid_alive "$pid"; then
    kill -KILL "$pid"
    wait_gone "$pid" 30 || die "pid $pid survived SIGKILL"
  fi
  rm -f "$work/broker.pid"
}

[ "$#" -ge 2 ] || die "usage: broker.sh start|stop|kill|bootstrap|log WORK [LOG_DIR]"
command="$1"
shift
case "$command" in
  start) start "$@" ;;
  stop) stop "$1" ;;
  kill) kill_broker "$1" ;;
  bootstrap)
    [ -s "$1/ports" ] || die "no broker was started from $1"
    read -r port _ <"$1/ports"
    echo "127.0.0.1:$port"
    ;;
  log) current_log "$1" ;;
  *) die "unknown command $command" ;;
esac
