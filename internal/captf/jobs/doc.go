// Package jobs builds and reads the Kubernetes Jobs that run CAPTF operations: one Job per
// operation, named deterministically (Name, ParseName) so that a reconcile that crashed after
// creating one finds it again; its shape (Build) fixed by the module contract's paths and the
// runner's flags; its outcome (Classify, ReadOutcome) read from the Job's conditions and the
// runner's termination message; and its history (List, Prune) kept short without losing the
// last outcome of any operation.
//
// Owner is the identity every CAPTF-created object derives its labels and owner references
// from; the inputs and leases packages use it too, so the three agree by construction.
//
// Build is pure: everything a Job depends on is in Params, resolved by the caller.
package jobs
