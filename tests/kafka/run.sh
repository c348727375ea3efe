#!/usr/bin/env bash
# The checks against a real Apache Kafka 4.4 broker, in one command:
#
#   tests/kafka/run.sh            # a missing Java, Maven or Python client skips, with the reason
#   CI=true tests/kafka/run.sh    # ... fails instead
#
# 1. Regenerates the broker fixture in a fresh broker (tests/fixtures/broker/make.sh into a
#    temporary directory), for kafka_broker_fixture's comparison with the committed one.
# 2. Runs every broker test target, tests/kafka_broker*.rs and tests/kafka_handoff*.rs, and those
#    of the workspace crates the root's cargo test covers (crates/partlog-engine/tests/
#    kafka_broker*.rs: partlog-engine is a default member), then crates/partlog-groups/tests/
#    kafka_broker*.rs (a package the root's cargo test leaves out: `-p partlog-groups`), with
#    PARTLOG_BROKER=1 (without it they skip) and PARTLOG_BROKER_REGENERATED_FIXTURE pointing at
#    step 1's output. Each test starts its own broker through tests/common/broker.rs; the tests
#    run one at a time (PARTLOG_BROKER_TEST_THREADS to change that), since each broker is a JVM
#    on a 2-core machine.
#
# Java and Kafka's jars are found as tests/common/kafka.rs finds them ($PARTLOG_JAVA,
# $PARTLOG_KAFKA_CLASSPATH, ~/.cache/partlog/kafka-classpath.txt, else .ci/kafka-classpath.sh with
# Maven); .ci/run exports both after its install-kafka stage. Cargo builds into
# $CARGO_TARGET_DIR as usual.
#
# Every broker a test starts records its pid in a directory this script owns; on exit (also on
# SIGTERM or SIGINT) any broker still alive from that list is killed, so a test process that was
# killed leaves no JVM behind. Only 127.0.0.1 is ever used.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
in_ci=false
[ "${CI:-}" = true ] && in_ci=true

skip_or_fail() {
  if $in_ci; then
    echo "tests/kafka/run.sh: FAIL: $* (required under CI=true)" >&2
    exit 1
  fi
  echo "tests/kafka/run.sh: SKIPPED: $*"
  exit 0
}

# --- What the broker needs ------------------------------------------------------------------
java="${PARTLOG_JAVA:-java}"
"$java" -version >/dev/null 2>&1 || skip_or_fail "cannot run Java ($java); install Java 17+ or set PARTLOG_JAVA"
if [ -z "${PARTLOG_KAFKA_CLASSPATH:-}" ]; then
  classpath_file="${PARTLOG_CACHE:-$HOME/.cache/partlog}/kafka-classpath.txt"
  if [ ! -s "$classpath_file" ]; then
    command -v mvn >/dev/null || skip_or_fail "no Kafka classpath and no Maven to resolve it"
    classpath_file="$(timeout 900 bash .ci/kafka-classpath.sh)" ||
      skip_or_fail ".ci/kafka-classpath.sh could not resolve Kafka's jars"
  fi
  PARTLOG_KAFKA_CLASSPATH="$(cat "$classpath_file")"
fi
export PARTLOG_JAVA="$java" PARTLOG_KAFKA_CLASSPATH
python3 -c 'import confluent_kafka' 2>/dev/null ||
  skip_or_fail "python3 cannot import confluent_kafka (pip install confluent-kafka)"

# --- Cleanup of everything this script started ---------------------------------------------
scratch="$(mktemp -d "${TMPDIR:-/tmp}/partlog-kafka-run.XXXXXX")"
export PARTLOG_BROKER_PID_DIR="$scratch/broker-pids"
mkdir -p "$PARTLOG_BROKER_PID_DIR"
child=""
cleanup() {
  local rc=$? pid_file pid
  set +e # clean up everything, whatever fails
  if [ -n "$child" ]; then
    kill -TERM "$child" 2>/dev/null
    wait "$child" 2>/dev/null
  fi
  for pid_file in "$PARTLOG_BROKER_PID_DIR"/*; do
    [ -e "$pid_file" ] || continue
    pid="$(basename "$pid_file")"
    # Only a broker the harness recorded, and only while that pid still is a Kafka broker.
    if grep -qa 'kafka\.Kafka' "/proc/$pid/cmdline" 2>/dev/null; then
      echo "tests/kafka/run.sh: killing leftover broker $pid" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$scratch"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# run COMMAND...: in the background, so that a SIGTERM reaches the trap at once.
run() {
  "$@" &
  child=$!
  local rc=0
  wait "$child" || rc=$?
  child=""
  return "$rc"
}

# --- 1. The fixture, regenerated ------------------------------------------------------------
start=$(date +%s)
echo "== regenerating the broker fixture (tests/fixtures/broker/make.sh)"
run timeout 300 bash tests/fixtures/broker/make.sh "$scratch/fixture"
export PARTLOG_BROKER_REGENERATED_FIXTURE="$scratch/fixture"
echo "== regenerated in $(($(date +%s) - start))s"

# --- 2. The broker tests --------------------------------------------------------------------
targets=()
for file in tests/kafka_broker*.rs tests/kafka_handoff*.rs crates/partlog-engine/tests/kafka_broker*.rs; do
  [ -f "$file" ] || continue
  name="$(basename "$file" .rs)"
  targets+=(--test "$name")
done
[ "${#targets[@]}" -gt 0 ] || { echo "tests/kafka/run.sh: no broker test targets" >&2; exit 1; }
locked=()
if git ls-files --error-unmatch Cargo.lock >/dev/null 2>&1; then locked=(--locked); fi

start=$(date +%s)
echo "== cargo test ${targets[*]}"
export PARTLOG_BROKER=1
# The tests' temporary directories go under the scratch directory too, so a killed test leaves
# nothing behind either.
mkdir -p "$scratch/tmp"
# --nocapture: each broker start prints its duration and limit (tests/common/broker.rs), so a
# slow machine shows how close the starts came to their limit; a failing test also prints where
# its broker's server logs were kept ($PARTLOG_CACHE/broker-logs) and their last lines.
TMPDIR="$scratch/tmp" run timeout 1200 cargo test "${locked[@]}" --all-features "${targets[@]}" -- \
  --test-threads="${PARTLOG_BROKER_TEST_THREADS:-1}" --nocapture
group_targets=()
for file in crates/partlog-groups/tests/kafka_broker*.rs; do
  [ -f "$file" ] || continue
  group_targets+=(--test "$(basename "$file" .rs)")
done
if [ "${#group_targets[@]}" -gt 0 ]; then
  echo "== cargo test -p partlog-groups ${group_targets[*]}"
  TMPDIR="$scratch/tmp" run timeout 1200 cargo test "${locked[@]}" --all-features -p partlog-groups \
    "${group_targets[@]}" -- --test-threads="${PARTLOG_BROKER_TEST_THREADS:-1}" --nocapture
fi
echo "== broker tests done in $(($(date +%s) - start))s"
