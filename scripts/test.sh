#!/usr/bin/env bash
# `make test`: every test of the workspace, as `cargo test --workspace --no-fail-fast` runs them,
# but with the test binaries run TEST_JOBS at a time instead of one after another.
#
# Why: most of the suite's time is spent waiting on real controllers (an API server, CAPI,
# Kamaji, BYOH), not on the CPU, and the binaries are independent: each starts its own
# testbeds (`testbed::shared*` lives per process), on their own ports and directories. Tests
# inside one binary still run as cargo runs them (in threads, sharing that binary's testbeds).
#
# The output of each binary is printed whole when it ends (never interleaved), then a table of
# the binaries by wall time, slowest first. Exit 0 when every binary passed, 101 (as cargo test)
# otherwise. Binaries run longest-first by the last run's times (target/test-times.tsv).
#
#   TEST_JOBS=N     binaries at once (default 3)
#   TEST_FILTER=S   passed to every binary as its test-name filter
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO=${CARGO:-cargo}
JOBS=${TEST_JOBS:-3}
case "$JOBS" in '' | *[!0-9]* | 0) echo "TEST_JOBS must be a whole number from 1 to 16, not '$JOBS'" >&2; exit 2 ;; esac
if [ "$JOBS" -gt 16 ]; then echo "TEST_JOBS must be a whole number from 1 to 16, not '$JOBS'" >&2; exit 2; fi
LOGS=target/test-logs
TIMES=target/test-times.tsv
rm -rf "$LOGS"
mkdir -p "$LOGS"

# This builds every binary of the workspace too (each package with integration tests gets its
# binaries built for them); the tests run those (`testbed::workspace_binary`) instead of building
# a package alone, which would resolve the dependencies' features anew and compile them twice.
"$CARGO" test --workspace --no-run --message-format=json-render-diagnostics >"$LOGS/build.json"
export CAPI_KAMAJI_WORKSPACE_BUILT=1

# One line per test binary: <package dir> <executable>. A test harness is an artifact whose
# profile has "test":true (the last field of "profile"); its manifest_path comes first.
sed -n 's/.*"manifest_path":"\([^"]*\)".*"test":true},"features".*"executable":"\([^"]*\)".*/\1 \2/p' \
  "$LOGS/build.json" | sort -u >"$LOGS/binaries"
if [ ! -s "$LOGS/binaries" ]; then
  echo "found no test binaries in cargo's output ($LOGS/build.json)" >&2
  exit 1
fi

# Longest first: by the last run's times, else by those of a run on the 2-core machine the suite
# is held to (scripts/test-times.tsv); unknown ones first, they may be long.
[ -f "$TIMES" ] || TIMES=scripts/test-times.tsv
while read -r manifest exe; do
  base=$(basename "$exe")
  label="$(basename "$(dirname "$manifest")")/${base%-*}"
  t=
  if [ -f "$TIMES" ]; then t=$(awk -v b="$label" '$2 == b {print $1}' "$TIMES" | tail -1); fi
  echo "${t:-99999} $manifest $exe"
done <"$LOGS/binaries" | sort -rn | cut -d' ' -f2- >"$LOGS/order"

run_one() {
  local manifest=$1 exe=$2
  local name dir label start rc
  name=$(basename "$exe")
  dir=$(dirname "$manifest")
  # plugins/kamaji/tests/restart.rs and plugins/capi/tests/restart.rs: kamaji/restart, capi/restart.
  label="$(basename "$dir")/${name%-*}"
  start=$(date +%s)
  rc=0
  (
    cd "$dir"
    # As cargo test runs a test binary: from its package's directory, with $CARGO. Not with the
    # package's CARGO_* variables: the tests' own builds (testbed::cargo) would then differ from
    # the build above and rebuild.
    CARGO="$(command -v "$CARGO")"
    export CARGO
    # shellcheck disable=SC2086
    exec "$exe" ${TEST_FILTER:-}
  ) >"$LOGS/$name.log" 2>&1 </dev/null || rc=$?
  echo "$(($(date +%s) - start)) $label $rc $name" >"$LOGS/$name.done"
  {
    echo "     Running $exe ($(($(date +%s) - start))s, exit $rc)"
    cat "$LOGS/$name.log"
  } >"$LOGS/$name.report"
  # One whole report at a time.
  (
    flock 9
    cat "$LOGS/$name.report"
  ) 9>"$LOGS/.print-lock"
}

suite_start=$(date +%s)
running=0
while read -r manifest exe; do
  if [ "$running" -ge "$JOBS" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  run_one "$manifest" "$exe" &
  running=$((running + 1))
done <"$LOGS/order"
wait || true

echo "   Doc-tests"
doc_rc=0
"$CARGO" test --workspace --doc >"$LOGS/doc-tests.log" 2>&1 || doc_rc=$?
grep -E '^(test |error|failures|---- )|test result' "$LOGS/doc-tests.log" || true

cat "$LOGS"/*.done | sort -rn >"$LOGS/summary"
awk '{print $1, $2}' "$LOGS/summary" >target/test-times.tsv
echo
echo "test binaries by wall time (TEST_JOBS=$JOBS, suite $(($(date +%s) - suite_start))s):"
awk '{printf "  %5ss  %-32s %s\n", $1, $2, ($3 == 0 ? "ok" : "FAILED (exit " $3 ")")}' "$LOGS/summary"
failed=$(awk '$3 != 0 {print $2}' "$LOGS/summary")
if [ -n "$failed" ] || [ "$doc_rc" -ne 0 ]; then
  echo
  echo "error: failed:" $failed $([ "$doc_rc" -ne 0 ] && echo doc-tests) >&2
  echo "the output of each is in $LOGS/<binary>.log" >&2
  exit 101
fi
