// Package move is what both kubectl plugins need around `clusterctl move`: the preflight
// checks clusterctl itself would fail on (and the provider-specific ones a plugin adds), and
// the registration of the clusterctl Provider inventory object for a provider that was not
// installed by `clusterctl init` (Helm, Flux, Argo or plain manifests). It is parameterised by
// [Provider], so `kubectl captf move` and `kubectl capvco move` are the same code:
//
//	move.NewCmd(f, move.Capx, move.Extra{Preflight: captfChecks, Kinds: captfCRDs})
//
// The inventory object is written exactly as clusterctl init writes it
// (cmd/clusterctl/client/repository/components.go InventoryObject): clusterctl's own
// v1alpha3 types, name = manifest label, labels clusterctl.cluster.x-k8s.io="",
// cluster.x-k8s.io/provider=<manifest label> and clusterctl.cluster.x-k8s.io/core=inventory,
// and the inventory CRD from clusterctl's embedded manifest when it is missing.
package move
