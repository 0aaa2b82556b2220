"""`snakemake --lint`: the workflow is lint-clean at every shipped scale, every rule names the conda
environment that environment.yml defines, and helper functions live in workflows/rules/common.smk, away from the
rule files."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import workflow_copy

ROOT = Path(__file__).resolve().parents[1]
CLEAN = "Congratulations, your workflow is in a good condition!"


def _lint(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", "--lint", *args], cwd=cwd, capture_output=True,
                          text=True)


@pytest.mark.slow
@pytest.mark.parametrize("scale", ["tiny", "smoke"])
def test_lint_is_clean(tmp_path: Path, scale: str) -> None:
    res = _lint(workflow_copy(tmp_path), "--config", f"scale={scale}")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "Lints for" not in out, out[-6000:]
    assert CLEAN in out, out[-3000:]


def test_conda_env_is_the_one_environment_yml_names() -> None:
    """CONDA_ENV_NAME (common.smk, the env of --use-conda runs) is the environment `conda env create -f environment.yml` makes."""
    m = re.search(r'^CONDA_ENV_NAME = "([^"]+)"$', (ROOT / "workflows/rules/common.smk").read_text(), re.M)
    assert m, "CONDA_ENV_NAME is not a plain string in workflows/rules/common.smk"
    assert m.group(1) == yaml.safe_load((ROOT / "environment.yml").read_text())["name"]


@pytest.mark.slow
@pytest.mark.parametrize("args", [["--unlock"], ["--list-rules"]])
def test_commands_that_make_no_job_need_no_cores(tmp_path: Path, args: list[str]) -> None:
    """`snakemake --unlock` (the README's resume step) and `--list-rules` work without `--cores`: the rules that take
    every core read `workflow.cores` only when a job is made (common.smk `all_cores`); a rule with
    `threads: workflow.cores` made both fail with "Workflow requires a total number of cores to be defined"."""
    res = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=workflow_copy(tmp_path), capture_output=True,
                         text=True)
    out = res.stdout + res.stderr
    assert res.returncode == 0 and "number of cores" not in out, out[-3000:]
