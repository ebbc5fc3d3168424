"""Shared fixtures: the repository root and the `bilstm` command line (for bit-for-bit checks)."""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def rel_l2(got, want) -> float:
    """Relative L2 error of `got` against `want`, in float64."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


@pytest.fixture(scope="session")
def cli():
    """A function running `bilstm run ARGS...` (the release binary: $BILSTM_CLI, else built by
    cargo from this checkout) and failing the test when it fails."""
    exe = os.environ.get("BILSTM_CLI")
    if not exe and shutil.which("cargo") is None:
        # The GPU machine runs the installed wheel without a Rust toolchain; CI always has one.
        pytest.skip("neither $BILSTM_CLI nor cargo: the command line is not available here")
    if not exe:
        target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
        subprocess.run(
            ["cargo", "build", "--release", "--quiet", "--bin", "bilstm"], cwd=ROOT, check=True
        )
        exe = str(target / "release" / "bilstm")

    def run(*args):
        done = subprocess.run(
            [exe, "run", *map(str, args)], capture_output=True, text=True, cwd=ROOT
        )
        assert done.returncode == 0, f"bilstm run {args} failed:\n{done.stderr}"
        return done

    return run
