# Outputs of the machinepool role (contract v1alpha1): health, provider_id, provider_id_list,
# replicas and instances.

locals {
  instances = [for i in terraform_data.instance : {
    provider_id    = "capx-test:///${i.output.name}"
    instance_id    = i.output.name
    addresses      = [{ type = "InternalIP", address = "10.0.2.${parseint(substr(sha256(i.output.name), 0, 2), 16)}" }]
    failure_domain = i.output.failure_domain
    state          = "running"
  }]
}

output "provider_id" {
  description = "The pool's group id."
  value       = "capx-test://pool/${terraform_data.group.output.name}"
}

output "provider_id_list" {
  description = "providerIDs of every instance, sorted."
  value       = sort([for i in local.instances : i.provider_id])
}

output "replicas" {
  description = "Observed desired capacity."
  value       = local.replicas
}

output "instances" {
  description = "The pool's instances."
  value       = local.instances
}

output "health" {
  description = "Health of the pool."
  value = {
    state   = var.health_state
    healthy = var.health_state == "running"
    reasons = var.health_state == "running" ? [] : [var.health_state]
  }
}
