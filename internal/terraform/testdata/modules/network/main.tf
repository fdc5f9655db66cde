# A network whose two resources follow its one input, the way a VPC and its
# subnet do: changing cidr changes both.
variable "cidr" {
  type = string
}

resource "terraform_data" "vpc" {
  input = var.cidr
}

resource "terraform_data" "subnet" {
  input = "${terraform_data.vpc.output}/subnet"
}

output "vpc_cidr" {
  value = terraform_data.vpc.output
}
