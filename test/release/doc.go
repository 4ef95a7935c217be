// Package release proves the release artefacts that `make release-snapshot` builds with the
// tools that consume them: krew installs the plugin archives and kubectl runs them, kubectl
// completes through the shims, clusterctl generates clusters from the templates and initialises
// a real API server from the provider files, and the images hold what they promise.
//
// The tests carry the build tag release and read dist/ and _artifacts/release/, so they run
// after the snapshot: `make release-snapshot release-test`. A missing snapshot fails them (it
// is never a skip); a kubectl plugin whose cmd/ folder does not exist yet is skipped, saying so.
package release
