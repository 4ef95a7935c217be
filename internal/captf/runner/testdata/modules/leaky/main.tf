# A module that leaks on purpose: its provisioner prints a credential from the environment, a
# credential file, a sensitive root variable and a value only the plan marks sensitive. The
# runner must redact all of them from the pod log and the result.

variable "bootstrap_data" {
  type      = string
  sensitive = true
}

variable "token_file" {
  type = string
}

variable "fail" {
  type    = bool
  default = false
}

variable "fail_split" {
  type    = bool
  default = false
}

locals {
  decoded = nonsensitive(base64decode(var.bootstrap_data))
}

resource "terraform_data" "holder" {
  input = sensitive("module-internal-secret-7f3a9c2e")
}

resource "terraform_data" "leak" {
  provisioner "local-exec" {
    command = join("; ", [
      "echo env=$CAPX_CRED",
      "echo heuristic=$MY_API_TOKEN",
      "echo file=$(cat ${var.token_file})",
      "echo boot=${nonsensitive(var.bootstrap_data)}",
      "echo decoded=${nonsensitive(base64decode(var.bootstrap_data))}",
      "echo internal=${nonsensitive(terraform_data.holder.input)}",
      "echo secretenv=$DB_CONN",
      var.fail ? "echo failing with ${nonsensitive(var.bootstrap_data)} >&2; exit 1" : "true",
      # The decoded bootstrap value split by a colour code, as a coloured diagnostic prints it.
      var.fail_split ? "s='${local.decoded}'; printf 'Error: failing with %s\\033[1m%s\\n' \"$(echo \"$s\" | cut -c1-13)\" \"$(echo \"$s\" | cut -c14-)\" >&2; exit 1" : "true",
    ])
  }
}
