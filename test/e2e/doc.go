// Package e2e holds the end-to-end suites: the CAPTF lifecycle with real Jobs on a real kubelet,
// the whitesky.cloud simulator in the cluster, and clusterctl move between two management
// clusters. They run on local management clusters (test/localcluster) with Cluster API core and
// the providers installed by test/e2e/install, need root, and only build with -tags e2e:
//
//	make e2e        (or: go test -tags e2e -count=1 -p 1 -timeout 60m -v ./test/e2e/)
//
// Without their prerequisites they fail and say what is missing; they never skip. A failing
// suite leaves its objects, pod logs and daemon logs under _artifacts/e2e/<suite>/. See
// docs/e2e.md for what each suite asserts and how to add one.
package e2e
