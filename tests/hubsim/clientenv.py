"""The environment a client process needs to talk to the test Hub, and only to it.

HF_ENDPOINT is set before the process imports any client; HF_HOME and every cache below it point into
one folder (fresh folder = cold cache); download counts, telemetry and progress bars are off; the sealed
sitecustomize (sealed/) goes first on PYTHONPATH, so any connection beyond 127.0.0.1 is refused and
recorded in `violations_file`, and datasets' parquet-export lookup is off.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SEALED_DIR = Path(__file__).resolve().parent / "sealed"


def client_env(endpoint: str, home: str | os.PathLike, violations_file: str | os.PathLike | None = None) -> dict[str, str]:
    """Variables to add to os.environ for a sealed client subprocess using `endpoint` and HF_HOME `home`."""
    home = Path(home)
    env = {
        "HF_ENDPOINT": endpoint,
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(home / "hub"),
        "HF_DATASETS_CACHE": str(home / "datasets"),
        "HF_XET_CACHE": str(home / "xet"),
        "HF_HUB_OFFLINE": "0",
        "HF_DATASETS_OFFLINE": "0",
        "HF_UPDATE_DOWNLOAD_COUNTS": "0",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "PYTHONPATH": os.pathsep.join(p for p in (str(SEALED_DIR), str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p),
    }
    if violations_file is not None:
        env["HUBSIM_VIOLATIONS"] = str(violations_file)
    return env
