#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a while each (default 20s): `make fuzz`,
# FUZZTIME=5m make fuzz. New findings land in the package's testdata/fuzz and fail the run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fuzztime=${1:-20s}
status=0
while IFS=: read -r file name; do
  pkg=./$(dirname "$file")
  echo "[fuzz] $pkg $name for $fuzztime" >&2
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" || status=1
done < <(git grep -E '^func Fuzz[A-Za-z0-9_]+\(' -- '*_test.go' | sed -E 's/^([^:]+):func (Fuzz[A-Za-z0-9_]+)\(.*/\1:\2/')
exit $status
