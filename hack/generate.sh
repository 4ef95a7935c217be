#!/usr/bin/env bash
# Regenerates every generated file: deepcopy, CRDs (with the labels CAPI and clusterctl need) and
# RBAC. `make verify` runs this and fails on any diff, so generated files are never edited by hand.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
cg=bin/controller-gen
[[ -x $cg ]] || bash hack/toolchain.sh controller-gen

$cg object paths=./api/...
rm -f config/crd/bases/*.yaml
$cg crd paths=./api/... output:crd:artifacts:config=config/crd/bases
# cluster.x-k8s.io/v1beta2 tells CAPI which of our versions implements contract v1beta2;
# clusterctl.cluster.x-k8s.io makes clusterctl move discover the kinds at all.
for f in config/crd/bases/*.yaml; do
  sed -i '0,/^  name: /s//  labels:\n    cluster.x-k8s.io\/v1beta2: v1alpha1\n    clusterctl.cluster.x-k8s.io: ""\n  name: /' "$f"
done
$cg rbac:roleName=capx-manager paths=./internal/... output:rbac:artifacts:config=config/rbac
go run ./hack/apidocs config/crd/bases docs/api.md
go run ./hack/conditiondocs api/captf/v1alpha1/conditions.go "CAPTF conditions" docs/captf/conditions.md
go run ./hack/conditiondocs api/capvco/v1alpha1/conditions.go "CAPVCO conditions" docs/capvco/conditions.md
go run ./hack/flagdocs docs/manager.md
