"""Dataset side of the project: the PyTorch → LEIR translator and the workload library."""
