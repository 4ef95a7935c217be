# Outputs of the machine role (contract v1alpha1): health, provider_id, addresses,
# failure_domain, and interruptible (declared by every machine module).

output "provider_id" {
  description = "The Machine's providerID; known once the instance exists."
  value       = "capx-test:///${terraform_data.instance.output.name}"
}

output "addresses" {
  description = "Addresses of the instance."
  value = [
    { type = "InternalIP", address = local.ip },
    { type = "Hostname", address = terraform_data.instance.output.name },
  ]
}

output "failure_domain" {
  description = "The failure domain the instance runs in."
  value       = terraform_data.instance.output.failure_domain
}

output "interruptible" {
  description = "Whether the instance can be interrupted by the platform."
  value       = var.interruptible
}

output "health" {
  description = "Health of the instance."
  value = {
    state   = var.health_state
    healthy = var.health_state == "running"
    reasons = var.health_state == "running" ? [] : [var.health_state]
  }
}
