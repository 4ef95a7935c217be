# Offline test module for the cluster role: only terraform_data, locals, check blocks and
# outputs, so `tofu init` needs no provider and the module runs in a scratch image.

locals {
  name = "${var.captf_cluster.namespace}-${var.captf_cluster.name}"

  # The endpoint must stay stable for the object's life: derive it from the names only.
  endpoint = var.control_plane_endpoint != null ? var.control_plane_endpoint : {
    host = coalesce(var.endpoint_host, "${var.captf_cluster.name}.${var.captf_cluster.namespace}.capx.test")
    port = coalesce(try(var.cluster_network.api_server_port, null), var.endpoint_port)
  }
}

resource "terraform_data" "network" {
  input = {
    name = local.name
    cidr = var.network_cidr
    tags = var.captf_tags
  }
  # A new CIDR means a new network: the plan replaces it, which the destructive guard catches.
  triggers_replace = [var.network_cidr]
}

resource "terraform_data" "failure_domain" {
  for_each = toset(var.failure_domains)

  input = {
    name    = each.key
    network = terraform_data.network.output.name
    tags    = var.captf_tags
  }
}

resource "terraform_data" "control_plane" {
  input = {
    endpoint           = local.endpoint
    kubernetes_version = var.kubernetes_version
    initialized        = var.control_plane_initialized
    service_domain     = try(var.cluster_network.service_domain, null)
  }
}

check "endpoint" {
  assert {
    condition     = local.endpoint.port > 0 && local.endpoint.port < 65536
    error_message = "The control-plane endpoint port is out of range."
  }
}
