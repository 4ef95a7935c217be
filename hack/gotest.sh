#!/usr/bin/env bash
# Runs `go test` with the given arguments. When it fails, the failing tests and their failure
# messages are repeated at the end, so the tail of a long CI log says what failed: a failed test's
# runner output can otherwise push its message out of a log's last lines.
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
go test "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if ((rc != 0)); then
  printf '\n=== go test failed (exit %d); its failures, repeated from above ===\n' "$rc"
  # A message is a "file.go:N:" line and the indented lines under it (a Gomega failure spans
  # several); the runner output a failed controller test dumps is left out, it is above.
  awk '
    /^[ \t]*--- FAIL/ || /^panic:/ || /^FAIL[ \t]/ { print; keep = 0; next }
    /^[ \t]+[A-Za-z0-9_.-]+\.go:[0-9]+: / {
      keep = ($0 ~ /runner pods. output:/) ? 0 : 12
      print; next
    }
    keep > 0 { print; keep--; next }
  ' "$log" | head -200
fi
exit "$rc"
