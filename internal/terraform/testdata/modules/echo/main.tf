# Stores its input in the state as it is, so a test can read it back.
variable "value" {
  type = any
}

resource "terraform_data" "echo" {
  input = var.value
}
