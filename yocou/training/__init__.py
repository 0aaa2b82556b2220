"""Training: the loop, data parallelism and the token ladder's plan."""
