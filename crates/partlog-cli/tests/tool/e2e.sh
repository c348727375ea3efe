#!/usr/bin/env bash
# The partlog tool end to end, as a user drives it from a shell: produce, consume
# (including --follow against a live writer), a JSON copy and binary values, read_committed on
# the broker fixture, dump, verify, stats, perf-produce (a small run),
# compact (when the tool has it), delete-records and retention, then a corrupt file and its exit
# status. Every step checks what it printed or its exit status; the first failure stops the run.
#
#   bash crates/partlog-cli/tests/tool/e2e.sh [PATH_TO_PARTLOG]
#
# Without an argument it builds the tool (cargo build --release --bin partlog, at the workspace's
# root) first.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)"
if [ $# -ge 1 ]; then
  partlog="$1"
else
  (cd "$repo" && cargo build --release --bin partlog >/dev/null)
  partlog="${CARGO_TARGET_DIR:-$repo/target}/release/partlog"
fi
work="$(mktemp -d)"
follower=""
writer=""
cleanup() {
  [ -n "$follower" ] && kill "$follower" 2>/dev/null || true
  [ -n "$writer" ] && kill "$writer" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
step() { printf '== %s\n' "$*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
log="$work/orders-0"

step "produce: 500 keyed lines in 1 KiB segments"
seq 0 499 | sed 's/^\(.*\)$/user\1=order \1/' |
  "$partlog" produce "$log" --key-separator = --segment-bytes 1024 --allow-small-segments
[ "$(ls "$log"/*.log | wc -l)" -gt 5 ] || fail "expected several segments"

step "consume: from an offset, as text and JSON"
[ "$("$partlog" consume "$log" --offset 7 --count 1 --key-separator =)" = "user7=order 7" ] ||
  fail "consume --offset 7"
"$partlog" consume "$log" --offset 499 --format json | grep -q '"offset":499,.*"value":"order 499"' ||
  fail "consume --format json"
[ "$("$partlog" consume "$log" | wc -l)" = 500 ] || fail "consume all"

step "consume --follow tails a writer in another process"
fifo="$work/feed"
mkfifo "$fifo"
"$partlog" produce "$log" --flush always <"$fifo" &
writer=$!
exec 3>"$fifo"
# From offset 500, the end before the writer started: no line can be missed, whenever the
# follower gets going. `timeout` turns a follower that never sees them into a failure.
timeout 120 "$partlog" consume "$log" --offset 500 --follow --count 3 --poll-ms 10 >"$work/followed" &
follower=$!
printf 'live-1\nlive-2\nlive-3\n' >&3
wait "$follower" || fail "consume --follow exited non-zero"
follower=""
[ "$(cat "$work/followed")" = "$(printf 'live-1\nlive-2\nlive-3')" ] ||
  fail "consume --follow printed: $(cat "$work/followed")"

step "dump and stats while the writer is still running (read-only, no lock)"
"$partlog" dump "$log" | grep -q '^baseOffset: 0 lastOffset: [0-9]* count: [0-9]* ' || fail "dump"
"$partlog" stats "$log" | grep -q 'log end 503' || fail "stats of the live log"
exec 3>&-
wait "$writer" || fail "the writer exited non-zero"
writer=""

step "dump --records --index, verify, stats"
"$partlog" dump "$log" --records | grep -q '^| offset: 502 .* payload: live-3$' || fail "dump --records"
"$partlog" dump "$log" --index | grep -q '^index check: .* 0 mismatches$' || fail "dump --index"
"$partlog" verify "$log" | grep -q '^result: ok' || fail "verify"
"$partlog" stats "$log" --json | grep -q '"log_end_offset":503,"durable_offset":503' || fail "stats --json"

step "consume --format json | produce --format json copies the records exactly"
"$partlog" consume "$log" --format json | "$partlog" produce "$work/copy-0" --format json --quiet
[ "$("$partlog" dump "$work/copy-0" --json | sed 's/^{"offset":[0-9]*,//')" = \
  "$("$partlog" dump "$log" --json | sed 's/^{"offset":[0-9]*,//')" ] || fail "the JSON copy differs"

step "binary values: NUL and newline through JSON, newlines through -D"
echo '{"key":"k","value_b64":"AApiAA==","timestamp":1700000000000}' |
  "$partlog" produce "$work/binary-0" --format json --quiet
[ "$("$partlog" consume "$work/binary-0" -f '%s' | od -An -tx1 | tr -d ' \n')" = 000a6200 ] ||
  fail "a value with NUL and newline did not round-trip"
printf 'k1\tline 1\nline 2\0k2\tx\0' >"$work/records.in"
"$partlog" produce "$work/delimited-0" -D '\0' -K '\t' --quiet <"$work/records.in"
"$partlog" consume "$work/delimited-0" -D '\0' -K '\t' >"$work/records.out"
cmp -s "$work/records.in" "$work/records.out" || fail "-D/-K did not round-trip"
if echo '{"value":1}' | "$partlog" produce "$work/binary-0" --format json 2>"$work/err"; then
  fail "a bad JSON line was accepted"
fi
grep -q '^partlog: line 1 of standard input: .*; nothing was written$' "$work/err" ||
  fail "a bad JSON line: $(cat "$work/err")"

step "transactions: read_committed skips the broker fixture's aborted records, dump marks them"
cp -r "$repo/tests/fixtures/broker/partlog-fixture-0" "$work/"
fixture="$work/partlog-fixture-0"
[ "$("$partlog" consume "$fixture" -f '%o ')" = "0 1 2 3 4 5 6 7 8 9 10 11 12 13 15 16 " ] ||
  fail "read_uncommitted"
[ "$("$partlog" consume "$fixture" --isolation-level read_committed -f '%o ')" = \
  "0 1 2 3 4 5 6 7 8 9 10 11 12 13 " ] || fail "read_committed"
[ "$("$partlog" consume "$fixture" -X isolation.level=read_committed -f '%o\n' | wc -l)" = 14 ] ||
  fail "-X isolation.level=read_committed"
[ "$("$partlog" dump "$fixture" --txn-state | grep -c 'txnState: aborted')" = 2 ] ||
  fail "dump --txn-state"

step "perf-produce (a small run) and perf-consume"
"$partlog" perf-produce "$work/perf-0" --records 5000 --record-size 100 --batch 50 --json |
  grep -q '"records":5000' || fail "perf-produce"
"$partlog" perf-consume "$work/perf-0" --json | grep -q '"records":5000' || fail "perf-consume"

if "$partlog" compact --help >/dev/null 2>&1; then
  step "compact"
  keyed="$work/users-0"
  for round in 1 2 3; do seq 0 99 | sed "s/^/k/;s/\$/=v$round/"; done |
    "$partlog" produce "$keyed" --key-separator = --segment-bytes 1024 --allow-small-segments \
      --cleanup-policy compact
  "$partlog" compact "$keyed"
  [ "$("$partlog" consume "$keyed" | wc -l)" -lt 300 ] || fail "compact removed nothing"
  "$partlog" verify "$keyed" --cleanup-policy compact | grep -q '^result: ok' || fail "verify after compact"
else
  step "compact: SKIPPED (this partlog has no compact command yet)"
fi

step "delete-records and retention"
"$partlog" delete-records "$log" --before 300 | grep -q 'log start offset: 0 -> 300' ||
  fail "delete-records"
[ "$("$partlog" consume "$log" --count 1)" = "order 300" ] || fail "consume after delete-records"
"$partlog" retention "$log" --retention-bytes 2048 --retention-ms -1 | grep -q 'over retention.bytes' ||
  fail "retention"
if "$partlog" delete-records "$log" --before 100000 2>"$work/err"; then
  fail "delete-records above the log end succeeded"
fi
[ "$(wc -l <"$work/err")" = 1 ] || fail "the error was not one line: $(cat "$work/err")"

step "a corrupt file: verify exits 1, --repair refuses to cut it, dump shows what is valid, then the error in one line"
first="$(ls "$log"/*.log | head -1)"
printf '\x55' | dd of="$first" bs=1 seek=70 conv=notrunc status=none
status=0
"$partlog" verify "$log" >/dev/null || status=$?
[ "$status" = 1 ] || fail "verify of a corrupt log exited $status, not 1"
status=0
"$partlog" verify "$log" --repair >/dev/null 2>&1 || status=$?
[ "$status" = 2 ] || fail "verify --repair of a corrupt .log exited $status, not 2"
status=0
"$partlog" dump "$log" --records >/dev/null 2>"$work/err" || status=$?
[ "$status" = 1 ] && [ "$(wc -l <"$work/err")" = 1 ] || fail "dump of a corrupt log: exit $status"
grep -q 'panicked\|backtrace' "$work/err" && fail "a backtrace: $(cat "$work/err")"

step "every command's --help shows an example"
for command in produce consume dump verify stats perf-produce perf-consume delete-records retention upgrade compact config roll txn; do
  "$partlog" "$command" --help | grep -q "^  partlog $command" || fail "$command --help has no example"
done
echo "RESULT: the tool passed its end-to-end test"
