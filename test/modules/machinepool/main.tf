# Offline test module for the machinepool role: only terraform_data, locals, check blocks and
# outputs, so `tofu init` needs no provider and the module runs in a scratch image.

locals {
  requested = var.replicas == null ? 0 : var.replicas
  # As public pool modules do: the contract always passes autoscaling, {enabled = false, ...} when off.
  replicas        = var.autoscaling.enabled ? min(max(local.requested, var.autoscaling.min), var.autoscaling.max) : local.requested
  failure_domains = length(var.failure_domains) > 0 ? var.failure_domains : var.cluster_failure_domains
}

resource "terraform_data" "group" {
  input = {
    name               = var.machinepool_name
    kubernetes_version = var.kubernetes_version
    bootstrap_format   = var.bootstrap_format
    bootstrap_sha256   = sha256(var.bootstrap_data)
    node_labels        = var.node_labels
    network            = try(var.captf_cluster_outputs.network_name, null)
    label              = try(var.captf_cluster_outputs.pool_label, null)
    tags               = var.captf_tags
  }
}

# Replaced when the cluster's exports name another attachment: a change of the cluster's exports
# that makes the pool's plan destructive.
resource "terraform_data" "attachment" {
  triggers_replace = [try(var.captf_cluster_outputs.pool_attachment, null)]
}

# When the cluster's exports set pool_fail = "true", the apply fails after it changed the group:
# a pool apply of changed exports that stops midway. The condition reads the new output, unknown
# until applied, so the plan itself succeeds.
resource "terraform_data" "apply_check" {
  input      = try(var.captf_cluster_outputs.pool_fail, "") == "true"
  depends_on = [terraform_data.group]

  lifecycle {
    postcondition {
      condition     = !(self.input == true && self.output != null)
      error_message = "The cluster's exports set pool_fail: this apply fails after changing the group."
    }
  }
}

# One instance per replica: scaling down deletes instances, which the destructive guard sees.
resource "terraform_data" "instance" {
  count = local.replicas

  input = {
    name           = format("%s-%d", var.machinepool_name, count.index)
    group          = terraform_data.group.id
    failure_domain = length(local.failure_domains) > 0 ? local.failure_domains[count.index % length(local.failure_domains)] : null
  }
}

# With provisioner_fails set, a resource whose provisioner runs after it was created: true makes
# the provisioner fail, so OpenTofu keeps the resource tainted and the next apply replaces it (a
# destructive plan after an apply that failed midway). Unset (null), the resource does not exist.
resource "terraform_data" "provisioned" {
  count = var.provisioner_fails == null ? 0 : 1

  provisioner "local-exec" {
    command = var.provisioner_fails ? "exit 1" : "true"
  }
}

check "autoscaling" {
  assert {
    condition     = !var.autoscaling.enabled || var.autoscaling.min <= var.autoscaling.max
    error_message = "autoscaling.min must not exceed autoscaling.max."
  }
}
