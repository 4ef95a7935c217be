# Inputs of the machinepool role, exactly as CAPTF module contract v1alpha1 lists them: the
# common captf_* inputs and the machinepool role's own. The controller's generated root module
# passes every one of them by name, so each must be declared here.

variable "captf_contract" {
  description = "Module contract version the controller speaks."
  type        = string

  validation {
    condition     = var.captf_contract == "v1alpha1"
    error_message = "This module implements CAPTF module contract v1alpha1."
  }
}

variable "captf_cluster" {
  description = "The CAPI Cluster this pool belongs to."
  type        = object({ name = string, namespace = string })
}

variable "captf_object" {
  description = "The TerraformMachinePool running this module."
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

variable "machinepool_name" {
  description = "Name of the CAPI MachinePool."
  type        = string
}

variable "replicas" {
  description = "Desired number of instances."
  type        = number
  default     = 1
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

variable "failure_domains" {
  description = "Failure domains the MachinePool asks for."
  type        = list(string)
  default     = []
}

variable "cluster_failure_domains" {
  description = "Failure domains the cluster module offers (from the cluster's state)."
  type        = list(string)
  default     = []
}

variable "kubernetes_version" {
  description = "Kubernetes version of the pool, verbatim."
  type        = string
  default     = null
}

variable "node_labels" {
  description = "MachinePool.spec.template.metadata.labels."
  type        = map(string)
  default     = {}
}

variable "autoscaling" {
  description = "Autoscaler bounds: {enabled = false, min = 0, max = 0} when the pool does not autoscale."
  type        = object({ enabled = bool, min = number, max = number })
}

variable "current_instances" {
  description = "Instance ids of the module's last instances output ([] before the first apply)."
  type        = list(string)
  default     = []
}

variable "instances_to_remove" {
  description = "Instance ids CAPTF asks the module to remove: their Machines are being deleted."
  type        = list(string)
  default     = []
}

# User variables: every one has a default, as the contract advises.

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
