variable "cidr" {
  type = string
}

resource "terraform_data" "network" {
  input = var.cidr
}

output "cidr" {
  value = terraform_data.network.output
}
