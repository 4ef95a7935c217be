# Offline test module for the machine role: only terraform_data, locals, check blocks and
# outputs, so `tofu init` needs no provider and the module runs in a scratch image.

locals {
  # A stable, name-derived address: 10.0.1.<first byte of sha256(machine_name)>.
  ip = "10.0.1.${parseint(substr(sha256(var.machine_name), 0, 2), 16)}"
}

resource "terraform_data" "instance" {
  input = {
    name               = var.machine_name
    failure_domain     = var.failure_domain
    kubernetes_version = var.kubernetes_version
    control_plane      = var.control_plane
    bootstrap_format   = var.bootstrap_format
    bootstrap_sha256   = sha256(var.bootstrap_data)
    network            = try(var.captf_cluster_outputs.network_name, null)
    tags               = var.captf_tags
  }
  # Machines are immutable: another name is another instance.
  triggers_replace = [var.machine_name]
}

resource "terraform_data" "slow" {
  count = var.slow > 0 ? 1 : 0

  triggers_replace = [terraform_data.instance.id]

  provisioner "local-exec" {
    # exec: the sleep must be the process OpenTofu stops on interrupt, not a child of a shell.
    command = "exec sleep ${var.slow}"
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

check "bootstrap" {
  assert {
    condition     = can(base64decode(var.bootstrap_data))
    error_message = "bootstrap_data is not base64."
  }
}
