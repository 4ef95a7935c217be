# Outputs of the cluster role (contract v1alpha1): health, control_plane_endpoint,
# failure_domains and exports.

output "control_plane_endpoint" {
  description = "Where the control plane is reached; copied once into the TerraformCluster."
  value       = local.endpoint
}

output "failure_domains" {
  description = "Failure domains offered to machines."
  value = [for fd in sort(keys(terraform_data.failure_domain)) : {
    name          = fd
    control_plane = true
    attributes    = { network = terraform_data.failure_domain[fd].output.network }
  }]
}

output "exports" {
  description = "What machines and pools receive as captf_cluster_outputs."
  value = merge({
    network_id    = terraform_data.network.id
    network_name  = terraform_data.network.output.name
    network_cidr  = terraform_data.network.output.cidr
    endpoint_host = local.endpoint.host
  }, var.exports_extra)
}

output "health" {
  description = "Health of what the module provisions."
  value = {
    state   = var.health_state
    healthy = var.health_state == "running"
    message = var.health_message
    reasons = var.health_state == "running" ? [] : [var.health_state]
  }
}
