"""RunConfig from the command line: presets, TOML and ``--set`` overrides.

Resolution order (later wins): dataclass defaults < preset < TOML file < ``--placement``
< ``--set key=value`` overrides. The result is validated as a whole and can be dumped to
JSON and read back to an equal object.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, published as tomli
    import tomli as tomllib

from normlab.data.config import DataConfig
from normlab.errors import ConfigError, UserError
from normlab.model.config import ModelConfig
from normlab.presets import PRESETS
from normlab.runconfig import RunConfig
from normlab.schema import apply_overrides, merge, to_dict
from normlab.train.config import OptimConfig, TrainConfig


def load_toml(path: str | Path, label: str = "--config") -> dict[str, Any]:
    """Read a TOML file into plain data (validated later, as a whole); errors start with
    ``label`` (the option or kind of file) and the path."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise UserError(f"{label} {p}: no such file") from None
    except UnicodeDecodeError as e:  # tomllib decodes bytes itself and lets this through
        raise UserError(f"{label} {p}: not UTF-8 text (byte {e.start}); TOML files must be UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{label} {p}: not valid TOML ({e})") from None


def resolve(preset: str | None = None, config: str | Path | None = None,
            placement: str | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Build the RunConfig a command line asks for (see the module docstring for the order)."""
    data = to_dict(PRESETS.get(preset, "--preset")()) if preset else {}
    if config:
        data = merge(data, load_toml(config))
    if placement:
        data = merge(data, {"model": {"placement": placement}})
    data = apply_overrides(RunConfig, data, list(overrides or []))
    return RunConfig.from_dict(data)


__all__ = ["RunConfig", "ModelConfig", "DataConfig", "OptimConfig", "TrainConfig",
           "ConfigError", "resolve", "load_toml"]
