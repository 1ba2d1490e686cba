"""One module per `kernlock` command."""
