# A syntax error: the block is never closed.
resource "terraform_data" "oops" {
  input = "x"
