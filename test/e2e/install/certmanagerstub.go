package install

// CertManagerStub is the stand-in for cert-manager's release manifest that WriteRepository
// serves (certManagerStub says why), for tests that lay out a clusterctl repository themselves,
// such as test/release's run of docs/install.md's offline recipe.
func CertManagerStub() []byte { return []byte(certManagerStub) }
