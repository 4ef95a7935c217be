// Package inputs is everything about the inputs of a CAPTF run: reading the user's variables
// (ResolveVariables), generating the root module and its variable values (Render), hashing
// them (Hashes), and keeping them in Secrets: the durable inputs Secret of an object (Ensure,
// Read, MarkApplied), which outlives every Job and is what a destroy runs with, and the
// per-run Secret a Job mounts (RunSecret, EnsureRun).
//
// The rendering follows CAPTF module contract v1alpha1 exactly, so a module image written for
// the public CAPTF project runs unmodified: the same root variable names, the same untyped
// declarations, the same module source and re-exported outputs.
//
// What is hashed is what is rendered, and only that: the hash decides whether an object needs
// an apply, so anything that is not an input of the module (UIDs, generations, labels,
// annotations) must never change it. Values from Secrets and bootstrap data never appear in
// errors: messages name the source and the variable instead.
package inputs
