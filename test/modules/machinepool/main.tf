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

# The instances, keyed by name: the ones the module has (current_instances) stay unless CAPTF
# names them in instances_to_remove; the group is then trimmed (the last ones go) or filled up to
# replicas with new names, numbered after every name it knows, so no removed name comes back.
locals {
  removed = toset(var.instances_to_remove)
  kept    = [for n in var.current_instances : n if !contains(local.removed, n)]
  prefix  = "${var.machinepool_name}-"
  numbers = [for n in setunion(local.kept, local.removed) : try(tonumber(trimprefix(n, local.prefix)), -1) if startswith(n, local.prefix)]
  next    = length(local.numbers) > 0 ? max(local.numbers...) + 1 : 0
  fresh   = [for i in range(max(0, local.replicas - length(local.kept))) : format("%s%d", local.prefix, local.next + i)]
  members = concat(slice(local.kept, 0, min(length(local.kept), local.replicas)), local.fresh)
}

# One instance per member: scaling down deletes instances, which the destructive guard sees.
resource "terraform_data" "instance" {
  for_each = toset(local.members)

  input = {
    name           = each.key
    group          = terraform_data.group.id
    # By the instance's number, so removing one instance moves no other.
    failure_domain = length(local.failure_domains) > 0 ? local.failure_domains[try(tonumber(trimprefix(each.key, local.prefix)), 0) % length(local.failure_domains)] : null
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
