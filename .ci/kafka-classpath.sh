#!/usr/bin/env bash
# Resolve Apache Kafka 4.4.0's jars (.ci/pom.xml) from Maven Central and write their classpath.
#
#   .ci/kafka-classpath.sh        # prints the path of the classpath file on stdout
#
# The Maven repository and the classpath file live under $PARTLOG_CACHE (default
# $HOME/.cache/partlog): m2/ and kafka-classpath.txt. Used by .ci/run, and by
# tests/common/kafka.rs when neither PARTLOG_KAFKA_CLASSPATH nor the file exists yet.
# Needs mvn (and the JDK it runs on). Maven's own chatter goes to stderr.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${PARTLOG_CACHE:-$HOME/.cache/partlog}"
out="$cache/kafka-classpath.txt"
mkdir -p "$cache"
command -v mvn >/dev/null || { echo "kafka-classpath.sh: mvn not found on PATH" >&2; exit 1; }

# Written to a temporary name and renamed, so a test binary reading the file never sees half of it.
tmp="$(mktemp "$cache/kafka-classpath.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
mvn -B -q -Dstyle.color=never -f "$here/pom.xml" -Dmaven.repo.local="$cache/m2" \
  dependency:build-classpath -Dmdep.outputFile="$tmp" >&2

missing=0
IFS=: read -r -a jars <"$tmp" || true  # the file has no final newline
for jar in "${jars[@]}"; do
  [ -f "$jar" ] || { echo "kafka-classpath.sh: missing jar $jar" >&2; missing=1; }
done
[ "${#jars[@]}" -gt 0 ] && [ "$missing" = 0 ] || { echo "kafka-classpath.sh: bad classpath" >&2; exit 1; }
mv "$tmp" "$out"
echo "$out"
