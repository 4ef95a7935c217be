// Package planview turns a saved plan (`tofu show -json`) into the readable, redacted change
// list `kubectl captf plan show` renders, and stores it in Secrets beside the TerraformPlan.
//
// Nothing sensitive leaves FromPlan unmasked: values the plan marks sensitive (before_sensitive,
// after_sensitive) become [Sensitive], values not known until apply become [Unknown], and every
// remaining string goes through the caller's redactor (the runner's, which knows the run's
// credentials and every sensitive value of the plan). Values are cut at MaxValueBytes. The one
// exception are the contract outputs whose values are no secret (contract.PublicOutput: CAPTF
// copies them onto the CAPI objects anyway): the generated root module marks every output
// sensitive, and the approver must see a plan move the endpoint or the provider IDs.
//
// The Secret codec (Encode, Decode) is size-bounded: the view is gzip-compressed JSON split into
// at most MaxChunks Secrets of MaxChunkBytes; a view that does not fit loses attribute detail,
// then changes, and says so (Truncated). Decode refuses missing or extra chunks, oversized data
// and gzip bombs.
package planview
