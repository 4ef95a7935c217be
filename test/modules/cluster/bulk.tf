# Bulk state for tests of states that approach or outgrow a Secret: bulk_resources resources,
# each holding bulk_hashes sha512 hex digests (128 bytes each, stored twice in the state, as
# input and output; hex compresses about 2:1, so 24 x 512 hashes make about 1.6 MiB gzip).
# Off by default.

variable "bulk_resources" {
  description = "How many bulk resources to create (tests only)."
  type        = number
  default     = 0
}

variable "bulk_hashes" {
  description = "How many 128-byte digests each bulk resource holds (tests only)."
  type        = number
  default     = 512
}

resource "terraform_data" "bulk" {
  count = var.bulk_resources
  input = join("", [for i in range(var.bulk_hashes) : sha512("${count.index}-${i}")])
}
