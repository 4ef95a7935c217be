// Package admission embeds the admission policies (the YAML files beside it), so the manager
// can check that the API server enforces exactly these before it honours an approval.
package admission

import "embed"

// Files holds every policy file of this folder.
//
//go:embed *.yaml
var Files embed.FS
