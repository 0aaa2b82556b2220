# Helpers shared by the rule files.

import os


def launcher(wildcards):
    """`yocou`, or torchrun over launch.nproc processes (DDP) when it is above 1."""
    n = config["launch"].get("nproc", 1)
    return f"torchrun --standalone --nproc-per-node {n} -m yocou.cli" if n > 1 else "yocou"
