# Inputs of the machine role, exactly as CAPTF module contract v1alpha1 lists them: the common
# captf_* inputs and the machine role's own. The controller's generated root module passes every
# one of them by name, so each must be declared here.

variable "captf_contract" {
  description = "Module contract version the controller speaks."
  type        = string

  validation {
    condition     = var.captf_contract == "v1alpha1"
    error_message = "This module implements CAPTF module contract v1alpha1."
  }
}

variable "captf_cluster" {
  description = "The CAPI Cluster this machine belongs to."
  type        = object({ name = string, namespace = string })
}

variable "captf_object" {
  description = "The TerraformMachine running this module."
  type        = object({ kind = string, name = string, namespace = string })
}

variable "captf_tags" {
  description = "Tags every taggable resource carries."
  type        = map(string)
  default     = {}
}

variable "captf_cluster_outputs" {
  description = "The cluster module's exports output ({} when the cluster is managed elsewhere)."
  type        = any
  default     = {}
}

variable "machine_name" {
  description = "Name of the CAPI Machine."
  type        = string
}

variable "bootstrap_data" {
  description = "Base64 of the bootstrap Secret's value."
  type        = string
  sensitive   = true
}

variable "bootstrap_format" {
  description = "cloud-config or ignition."
  type        = string
  default     = "cloud-config"

  validation {
    condition     = contains(["cloud-config", "ignition"], var.bootstrap_format)
    error_message = "bootstrap_format must be cloud-config or ignition."
  }
}

variable "failure_domain" {
  description = "Failure domain the Machine asks for, or null."
  type        = string
  default     = null
}

variable "kubernetes_version" {
  description = "Kubernetes version of the Machine, verbatim."
  type        = string
  default     = null
}

variable "control_plane" {
  description = "Whether the Machine is a control-plane machine."
  type        = bool
  default     = false
}

# User variables: every one has a default, as the contract advises.

variable "slow" {
  description = <<-EOT
    Seconds the apply spends in a local-exec `sleep` after creating the instance (0 = none), for
    tests that interrupt an apply. It runs /bin/sh and sleep, which a scratch image lacks, so it
    is opt-in.
  EOT
  type        = number
  default     = 0
}

variable "interruptible" {
  description = "Whether the instance is interruptible (spot)."
  type        = bool
  default     = false
}

variable "health_state" {
  description = "health.state to report: pending, running, degraded, stopped, terminated or unknown."
  type        = string
  default     = "running"
}

variable "provisioner_fails" {
  description = "Adds a resource whose local-exec provisioner fails (true) or succeeds (false); null: none. Needs /bin/sh."
  type        = bool
  default     = null
}
