# An apply that takes long enough to be stopped. Its command writes the pid
# of a sleep to pidfile, so a test can tell that it is gone. With orphan, the
# sleep runs in the background, where the shell makes it ignore SIGINT: when
# terraform stops the command, it kills the shell and leaves the sleep.
variable "pidfile" {
  type = string
}

variable "orphan" {
  type    = bool
  default = false
}

resource "terraform_data" "slow" {
  provisioner "local-exec" {
    command = var.orphan ? "sleep 30 & echo $! > '${var.pidfile}'; wait" : "echo $$ > '${var.pidfile}'; exec sleep 30"
  }
}
