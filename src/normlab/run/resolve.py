"""RunConfig from the command line: presets, TOML, ``--set`` overrides and option flags.

Resolution order (later wins): dataclass defaults < preset < the model of ``train.init_from``
< TOML file < ``--placement`` < ``--set key=value`` < ``options`` (the typed values of
flags such as ``--steps N``, keyed by the field they set). When any layer sets
``train.init_from`` (``--init-from DIR`` is such a flag), DIR's model section replaces the
preset's, beneath everything the user typed (see ``normlab.run.init_from``). The result
is validated as a whole and can be dumped to JSON and read back to an equal object. This
is the only way a command line becomes a config: ``normlab config`` and ``normlab train``
both call it, so the first shows what the second runs.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, published as tomli
    import tomli as tomllib

from normlab.core.errors import ConfigError, UserError
from normlab.core.schema import apply_overrides, field_type, merge, set_dotted, to_dict
from normlab.data.config import DataConfig
from normlab.model.config import ModelConfig
from normlab.run.config import RunConfig
from normlab.run.init_from import init_layer
from normlab.run.presets import PRESETS
from normlab.run.train_config import OptimConfig, TrainConfig


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
            placement: str | None = None, overrides: list[str] | None = None,
            options: Mapping[str, Any] | None = None) -> RunConfig:
    """Build the RunConfig a command line asks for (see the module docstring for the order).

    ``options`` maps dotted keys to typed values (``{"train.steps": 100}``); None values are
    left out, so a flag that was not given changes nothing.
    """
    base = to_dict(PRESETS.get(preset, "--preset")()) if preset else {}
    toml = load_toml(config) if config else {}
    flags = {k: v for k, v in (options or {}).items() if v is not None}
    for key in flags:
        field_type(RunConfig, key)  # an unknown key is refused by name, as with --set

    def layered(start: dict[str, Any]) -> dict[str, Any]:
        data = copy.deepcopy(merge(start, toml))  # a copy: --set writes into nested tables, and
        # the layers are read twice when train.init_from is set
        if placement:
            data = merge(data, {"model": {"placement": placement}})
        data = apply_overrides(RunConfig, data, list(overrides or []))
        for key, value in flags.items():
            set_dotted(data, key, value)
        return data

    data = layered(base)
    train = data.get("train")
    init_dir = train.get("init_from") if isinstance(train, dict) else None
    if isinstance(init_dir, str) and init_dir.strip():  # known once every layer is read: rebuild on DIR

        data = layered(init_layer(base, init_dir))
    return RunConfig.from_dict(data)


__all__ = ["RunConfig", "ModelConfig", "DataConfig", "OptimConfig", "TrainConfig",
           "ConfigError", "resolve", "load_toml"]
