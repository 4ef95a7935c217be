// Package state reads and tends the state that the OpenTofu/Terraform kubernetes backend keeps in
// Secrets: tfstate-default-<suffix> (gzip-compressed state JSON in the data key "tfstate") and,
// when Terraform splits a large state, tfstate-default-<suffix>-part-<N>.
//
// The package never trusts that content: any module that runs with the runner's permissions can
// write those Secrets. Decode bounds what it reads (chunk count, decompressed size), refuses
// anything but state version 4, recognises OpenTofu's encrypted state before anything else, and
// parses only the few facts the controller needs, so a state never has to be held in memory as
// a whole document. Errors name Secrets and counts, never state contents or output values.
//
// Besides reading, the package owns everything else that touches those Secrets: the backend's
// lock Lease (ReadLock), owner references and the applied inputs hash (Adopt), backups (Backup,
// Prune, Backups, FindBackup), deletionPolicy Retain (Retain, AdoptRetained) and cleanup after a
// destroy (Delete). Functions that only change metadata work on metadata (PartialObjectMetadata)
// and patch with a resourceVersion precondition, so they never race the backend's own writes
// into a lost update and never download state data they do not need.
package state
