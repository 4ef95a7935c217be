# Inputs of the cluster role, exactly as CAPTF module contract v1alpha1 lists them: the common
# captf_* inputs and the cluster role's own. The controller's generated root module passes every
# one of them by name, so each must be declared here (an undeclared one fails the plan with
# "Unsupported argument"). captf_cluster_outputs is not passed to the cluster role.

variable "captf_contract" {
  description = "Module contract version the controller speaks."
  type        = string

  validation {
    condition     = var.captf_contract == "v1alpha1"
    error_message = "This module implements CAPTF module contract v1alpha1."
  }
}

variable "captf_cluster" {
  description = "The CAPI Cluster this module belongs to."
  type        = object({ name = string, namespace = string })
}

variable "captf_object" {
  description = "The TerraformCluster running this module."
  type        = object({ kind = string, name = string, namespace = string })
}

variable "captf_tags" {
  description = "Tags every taggable resource carries."
  type        = map(string)
  default     = {}
}

variable "control_plane_endpoint" {
  description = "Endpoint fixed by the Cluster or TerraformCluster; null lets the module choose."
  type        = object({ host = string, port = number })
  default     = null
}

variable "kubernetes_version" {
  description = "Cluster.spec.topology.version, or null."
  type        = string
  default     = null
}

variable "control_plane_initialized" {
  description = "Whether the control plane has been initialized (latched true)."
  type        = bool
  default     = false
}

variable "cluster_network" {
  description = "Cluster.spec.clusterNetwork, or null."
  type = object({
    pods            = optional(list(string))
    services        = optional(list(string))
    service_domain  = optional(string)
    api_server_port = optional(number)
  })
  default = null
}

# User variables: every one has a default, as the contract advises.

variable "endpoint_host" {
  description = "Host of the control-plane endpoint the module reports when none is given."
  type        = string
  default     = null
}

variable "endpoint_port" {
  description = "Port of the reported control-plane endpoint when neither the input nor cluster_network sets one."
  type        = number
  default     = 6443
}

variable "failure_domains" {
  description = "Names of the failure domains the module offers; removing one deletes it."
  type        = list(string)
  default     = ["fd-a", "fd-b"]
}

variable "network_cidr" {
  description = "CIDR of the cluster network; changing it replaces the network (a destructive plan)."
  type        = string
  default     = "10.0.0.0/16"
}

variable "health_state" {
  description = "health.state to report: pending, running, degraded, stopped, terminated or unknown."
  type        = string
  default     = "running"

  validation {
    condition     = contains(["pending", "running", "degraded", "stopped", "terminated", "unknown"], var.health_state)
    error_message = "health_state must be one of pending, running, degraded, stopped, terminated, unknown."
  }
}

variable "health_message" {
  description = "health.message to report."
  type        = string
  default     = null
}

variable "exports_extra" {
  description = "Extra entries for the exports output."
  type        = map(string)
  default     = {}
}
