"""Reading a run's config.json, as the pages and ``inspect`` do, imports no torch and nothing of
``normlab.train``: the config layer checks its names (``optim.schedule``) with registries below
training, and leaves ``train.loggers`` to the run's start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from normlab.run.config import RunConfig
from normlab.run.dir import RunDir

# In a fresh interpreter: read the run the ways a reader does, then list what got imported.
READ = """
import json, sys
from pathlib import Path
{extra}
from normlab.run.config import RunConfig
from normlab.run.dir import RunDir
run = RunDir(sys.argv[1])
cfg = run.config()
assert cfg == RunConfig.from_json(json.dumps(run.config_dict()))
assert (cfg.optim.schedule, cfg.train.loggers) == ("linear", ["tensorboard", "tsv"])
print(json.dumps(sorted(m for m in sys.modules if m == "torch" or m.startswith(("torch.", "normlab.train")))))
"""


def _heavy_modules_after_reading(run: Path, extra: str = "") -> list[str]:
    r = subprocess.run([sys.executable, "-c", READ.format(extra=extra), str(run)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _run(tmp_path: Path) -> Path:
    # A schedule looked up by OptimConfig, a built-in logger, and one of a plugin not installed here.
    cfg = RunConfig.from_dict({"optim": {"schedule": "linear"}, "train": {"loggers": ["tensorboard", "tsv"]},
                               "model": {"norm": "rmsnorm"}})
    RunDir(tmp_path / "run").write_config(cfg)
    return tmp_path / "run"


def test_reading_a_run_config_imports_no_torch_and_no_training(tmp_path) -> None:
    assert _heavy_modules_after_reading(_run(tmp_path)) == []


def test_the_check_sees_training_when_it_is_imported(tmp_path) -> None:
    """The probe itself: a reader that pulled in training (as the old string catalogue did) shows."""
    found = _heavy_modules_after_reading(_run(tmp_path), extra="import normlab.train.loggers")
    assert "normlab.train.loggers" in found
