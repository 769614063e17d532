"""The checks a study spec's fields pass before a single trial starts (axis values against
RunConfig's types, stages, the trial name, paths inside the store), each failing with a
:class:`~normlab.core.errors.ConfigError` that names the field. Kept apart from
``normlab.study.spec``, which owns the StudySpec itself (its grid, its trials, reading it from
TOML), because the store checks the run directories its rows name with :func:`safe_relpath`:
it needs that check, not the spec.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from normlab.core.coerce import coerce
from normlab.core.errors import NO_VALUE, ConfigError
from normlab.core.schema import field_type
from normlab.study.registries import TRIALS


def check_stages(stages: Any, trial: str, extend_to: int | None) -> list[int]:
    """The stages as increasing positive steps, at least two; only for training trials, and not
    beside extend_stalled_to (the stages extend every run a part reads, not only stalled ones)."""
    if not isinstance(stages, (list, tuple)):
        raise ConfigError("stages", stages, "a list of steps, e.g. stages = [200, 400, 1000, 2000]")
    got = [coerce(s, int, f"stages[{i}]") for i, s in enumerate(stages)]
    if len(got) < 2 or got[0] <= 0 or any(b <= a for a, b in zip(got, got[1:])):
        raise ConfigError("stages", got, "must be at least two positive steps in increasing order, the first "
                          "train.steps, e.g. [200, 400, 1000, 2000]")
    if trial != "train":
        raise ConfigError("stages", got, "only training trials (trial = \"train\") are resumed; remove stages")
    if extend_to is not None:
        raise ConfigError("stages", got, "stages extend every run a claim reads, which supersedes "
                          "extend_stalled_to: remove one of the two")
    return got


def check_axis(cls: type, key: str, values: Any, where: str) -> list[Any]:
    """An axis's values, each coerced to the type of ``key`` in ``cls``; errors name ``where``."""
    try:
        tp = field_type(cls, key)  # unknown keys fail here, suggesting the closest key
    except ConfigError as e:
        raise ConfigError(where, NO_VALUE, e.fix) from None  # named where it is: axes.KEY, zip[i].KEY
    if not isinstance(values, (list, tuple)):
        raise ConfigError(where, values, f"an axis is a list of values, e.g. {key} = [{values!r}]")
    if not values:
        raise ConfigError(where, [], "empty axis: give at least one value (or remove the axis)")
    return [coerce(v, tp, f"{where}[{i}]") for i, v in enumerate(values)]


def trial_label(params: dict[str, Any]) -> str:
    """``k=v, ...``: how an error names the trial it is about."""
    return ", ".join(f"{k}={v}" for k, v in params.items())


def safe_relpath(path: str, field_name: str) -> PurePosixPath:
    """A path inside the store: relative, no ``..`` (a spec or database cannot write elsewhere)."""
    p = PurePosixPath(str(path).replace("\\", "/"))
    if not str(path) or p.is_absolute() or ".." in p.parts or (p.parts and ":" in p.parts[0]):
        raise ConfigError(field_name, path, "must be a relative path inside the store directory "
                          "(no absolute path, no '..')")
    return p


def trial_fn(name: str) -> None:
    """Check a trial name: a TRIALS name or ``"module:function"`` (imported only by workers)."""

    if ":" in name:
        mod, _, attr = name.partition(":")
        if not mod or not attr:
            raise ConfigError("trial", name, "write a custom trial as 'package.module:function'")
    else:
        TRIALS.get(name, "trial")
