"""Workflow glue: the pipeline's config, scales, studies, committed results, the cluster."""
