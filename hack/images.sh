#!/usr/bin/env bash
# Builds every image a local management cluster runs, from this checkout, as docker-archive
# tarballs under _artifacts/images (nothing is pushed or pulled): the manager (manager + CAPTF
# runner, static), the Cluster API core manager, vcosim, httpget and the CAPTF module images of
# test/modules. Prints "ref<TAB>tarball" per image. Tags are content tags: an unchanged image is
# not rebuilt. `hack/cluster` clusters import them with `ctr images import` (the quickstart and
# the e2e suites do it for you). Details: docs/local-cluster.md.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
exec bash "$root/hack/quickstart.sh" images "$@"
