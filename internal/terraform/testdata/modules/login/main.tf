# Takes a password and a user, as a provider's credentials would be taken,
# and keeps both in the state.
variable "password" {
  type = string
}

variable "user" {
  type = string
}

resource "terraform_data" "login" {
  input = "${var.user}:${var.password}"
}
