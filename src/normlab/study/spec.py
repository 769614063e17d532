"""StudySpec: a grid of training runs, from a TOML file or a preset function.

A study is a base run config plus *axes* (dotted config keys, each with a list of values),
``zip`` groups (axes that vary together instead of crossing), and seeds. Axes are
*scientific* (what the study compares) or *nuisance* (tuned away before comparing),
the vocabulary of the Google Deep Learning Tuning Playbook (Godbole et al. 2023).

Everything is validated before a single trial starts: every key must exist, every axis
must be non-empty, every value must have the key's type, and every trial's RunConfig must
build. Errors are :class:`~normlab.core.errors.ConfigError` naming the offending key; the
checks of single fields are ``normlab.study.spec_checks``.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normlab.core.coerce import coerce
from normlab.core.errors import NO_VALUE, ConfigError, unknown_name
from normlab.core.schema import Section, merge, set_dotted, to_dict
from normlab.run.presets import PRESETS
from normlab.run.resolve import RunConfig, load_toml
from normlab.study.registries import METRICS
from normlab.study.spec_checks import check_axis, check_stages, safe_relpath, trial_fn, trial_label

SPEC_KEYS = ("name", "description", "preset", "base", "axes", "zip", "seeds",
             "scientific", "nuisance", "retries", "trial", "runs_dir", "metric", "extend_stalled_to", "stages")


@dataclass(frozen=True)
class Trial:
    """One point of the grid: its axis values (incl. ``seed``) and its resolved config."""

    id: str
    index: int
    params: dict[str, Any]
    config_json: str


@dataclass
class StudySpec(Section):
    """A study: base RunConfig data, axes, zip groups, seeds and the role of each axis."""

    name: str
    base: dict[str, Any] = field(default_factory=dict)       # RunConfig data (nested tables)
    axes: dict[str, list[Any]] = field(default_factory=dict)  # "model.placement" -> ["post", "pre"]
    zip: list[dict[str, list[Any]]] = field(default_factory=list)  # each group varies together
    seeds: list[int] = field(default_factory=lambda: [0])
    scientific: list[str] = field(default_factory=list)  # empty: every axis not listed as nuisance
    nuisance: list[str] = field(default_factory=list)
    retries: int = 1           # extra attempts after a trial raises, before it is marked failed
    preset: str | None = None  # run preset the base starts from (see `normlab presets`)
    trial: str = "train"       # what one trial does: a TRIALS name or "module:function"
    runs_dir: str = "runs"     # run directories, relative to the store
    metric: str = "best_val_loss"  # summary entry the results table compares (lower is better)
    description: str = ""
    # Resume every trial still on the unigram plateau at its end, in stages, until it leaves it or
    # reaches this step (``normlab.study.extend``); None: trials stop at train.steps.
    extend_stalled_to: int | None = None
    # Nested horizons every run may be resumed to, the first train.steps (e.g. [200, 400, 1000,
    # 2000]): the claims engine extends the runs a part reads until it settles (claims/settling.py,
    # docs/studies.md "Stages"); a study run itself trains the first stage only. None: no stages.
    stages: list[int] | None = None

    def __post_init__(self) -> None:
        self.check(isinstance(self.name, str), "name", "must be a string, e.g. name = \"warmup-grid\"")
        self.check(bool(self.name) and "/" not in self.name, "name", "give the study a short name without '/'")
        self.check(isinstance(self.retries, int) and self.retries >= 0, "retries", "must be an integer >= 0")
        self.check(bool(self.seeds), "seeds", "list at least one seed, e.g. [0, 1, 2]")
        self.seeds = [coerce(s, int, f"seeds[{i}]") for i, s in enumerate(self.seeds)]
        self.check(min(self.seeds) >= 0 and len(set(self.seeds)) == len(self.seeds), "seeds",
                   "seeds must be distinct integers >= 0")
        safe_relpath(self.runs_dir, "runs_dir")
        trial_fn(self.trial)  # validates the name (the function itself loads lazily)
        self.check(isinstance(self.metric, str) and bool(self.metric), "metric",
                   "name a summary entry, e.g. best_val_loss")
        if self.extend_stalled_to is not None:
            self.extend_stalled_to = coerce(self.extend_stalled_to, int, "extend_stalled_to")
            self.check(self.extend_stalled_to > 0, "extend_stalled_to", "must be a step > train.steps, e.g. 1000")
            self.check(self.trial == "train", "extend_stalled_to", "only training trials (trial = \"train\") are "
                       "extended; remove extend_stalled_to")
        if self.stages is not None:
            self.stages = check_stages(self.stages, self.trial, self.extend_stalled_to)

        if self.trial in METRICS and self.metric not in METRICS[self.trial]:
            raise unknown_name("metric", self.metric, METRICS[self.trial])
        # Every axis key is a leaf of RunConfig, values non-empty and of the key's type.
        self.axes = {k: check_axis(RunConfig, k, v, f"axes.{k}") for k, v in self.axes.items()}
        groups = []
        for g, group in enumerate(self.zip):
            if not isinstance(group, dict) or not group:
                raise ConfigError(f"zip[{g}]", group, "a zip group is a table of key = [values], e.g. "
                                  "{\"optim.lr\" = [1e-3, 3e-4], \"optim.min_lr\" = [1e-4, 3e-5]}")
            group = {k: check_axis(RunConfig, k, v, f"zip[{g}].{k}") for k, v in group.items()}
            lengths = {k: len(v) for k, v in group.items()}
            if len(set(lengths.values())) > 1:
                raise ConfigError(f"zip[{g}]", lengths, "axes of a zip group vary together: give them "
                                  "lists of the same length")
            groups.append(group)
        self.zip = groups
        keys = self.axis_keys()
        for k in keys:
            if keys.count(k) > 1:
                raise ConfigError(k, NO_VALUE, "appears in more than one axis or zip group; list it once")
            if k == "seed":
                raise ConfigError("axes.seed", NO_VALUE, "the seed is an axis of its own: use seeds = [...]")
        for role in ("scientific", "nuisance"):
            for k in getattr(self, role):
                if k not in keys:
                    raise ConfigError(f"{role}", k, f"is not an axis of the study; axes: {', '.join(keys) or 'none'}")
        both = set(self.scientific) & set(self.nuisance)
        self.check(not both, "nuisance", f"{sorted(both)} also listed as scientific; an axis has one role")
        if self.scientific:
            loose = [k for k in keys if k not in self.scientific and k not in self.nuisance]
            self.check(not loose, "scientific", f"axes {loose} have no role: list each as scientific or nuisance")
        else:
            self.scientific = [k for k in keys if k not in self.nuisance]

    def axis_keys(self) -> list[str]:
        return list(self.axes) + [k for g in self.zip for k in g]

    def base_data(self) -> dict[str, Any]:
        """The base RunConfig as plain data: run preset (if any), then ``base`` on top."""

        data = to_dict(PRESETS.get(self.preset, "preset")()) if self.preset else {}
        return merge(data, self.base)

    def points(self) -> list[dict[str, Any]]:
        """Axis values of every grid point (no seed), in a stable order."""
        dims: list[list[dict[str, Any]]] = [[{k: v} for v in vals] for k, vals in self.axes.items()]
        for g in self.zip:
            n = len(next(iter(g.values())))
            dims.append([{k: vals[i] for k, vals in g.items()} for i in range(n)])
        out = []
        for combo in itertools.product(*dims):
            point: dict[str, Any] = {}
            for part in combo:
                point.update(part)
            out.append(point)
        return out

    def trials(self) -> list[Trial]:
        """Every trial, seed-major (a first pass over all points gives one seed of each), each
        with its RunConfig built and validated; identical configs are refused."""

        base = self.base_data()
        try:
            RunConfig.from_dict(base)
        except ConfigError as e:
            raise ConfigError(f"base.{e.field}", e.value, e.fix) from None
        out: list[Trial] = []
        seen: dict[str, dict[str, Any]] = {}
        for seed in self.seeds:
            for point in self.points():
                data = copy.deepcopy(base)
                for k, v in point.items():
                    set_dotted(data, k, v)
                data["seed"] = seed
                params = {**point, "seed": seed}
                try:
                    cfg = RunConfig.from_dict(data)
                except ConfigError as e:
                    raise ConfigError(e.field, e.value, f"{e.fix} (in the trial with {trial_label(params)})") from None
                self._check_extension(cfg, params)
                text = cfg.to_json()
                tid = hashlib.sha256(text.encode()).hexdigest()[:16]
                if tid in seen:
                    raise ConfigError(", ".join(self.axis_keys()), NO_VALUE, f"trials {trial_label(seen[tid])} and "
                                      f"{trial_label(params)} resolve to the same config; drop the redundant values")
                seen[tid] = params
                out.append(Trial(tid, len(out), params, text))
        return out

    def _check_extension(self, cfg: RunConfig, params: dict[str, Any]) -> None:
        """Horizons nest only when a longer run's first steps are the shorter run: a constant lr
        after warm-up, and an extension past the trial's own length (stages: starting at it)."""
        if self.stages is not None:
            if cfg.optim.schedule != "constant":
                raise ConfigError("stages", self.stages, f"a stage resumes a run, which matches a longer run only "
                                  f"with a constant lr after warm-up; optim.schedule={cfg.optim.schedule!r} in the "
                                  f"trial with {trial_label(params)}: set it to \"constant\" or remove stages")
            if self.stages[0] != cfg.train.steps:
                raise ConfigError("stages", self.stages, f"the first stage is where every run stops first: it must "
                                  f"be train.steps={cfg.train.steps} (in the trial with {trial_label(params)})")
        to = self.extend_stalled_to
        if to is None:
            return
        if cfg.optim.schedule != "constant":
            raise ConfigError("extend_stalled_to", to, f"extending resumes a run, which matches a longer run only "
                              f"with a constant lr after warm-up; optim.schedule={cfg.optim.schedule!r} in the trial "
                              f"with {trial_label(params)}: set it to \"constant\" or remove extend_stalled_to")
        if to <= cfg.train.steps:
            raise ConfigError("extend_stalled_to", to, f"must exceed train.steps={cfg.train.steps} (in the trial "
                              f"with {trial_label(params)})")

    def to_json_data(self) -> dict[str, Any]:
        """The resolved spec (written to STORE/spec.json; ``scientific`` filled in). Without an
        extension the key is left out, so the spec.json of a study that has none (and its hash)
        is what it was before the option existed."""
        data = to_dict(self)
        for key in ("extend_stalled_to", "stages"):  # unset: left out, so old spec.json files read the same
            if data.get(key) is None:
                data.pop(key, None)
        return data


def _flatten(table: Any, prefix: str, where: str) -> dict[str, Any]:
    """TOML ``[axes] model.n_layer = [..]`` parses as nested tables: back to dotted keys."""
    if not isinstance(table, dict):
        raise ConfigError(where, table, "expected a table of dotted.key = [values]")
    out: dict[str, Any] = {}
    for k, v in table.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + ".", where))
        else:
            out[key] = v
    return out


def spec_from_dict(data: dict[str, Any]) -> StudySpec:
    """Build a StudySpec from plain data (a parsed TOML file or a spec.json)."""
    for k in data:
        if k not in SPEC_KEYS:
            import difflib

            close = difflib.get_close_matches(k, SPEC_KEYS, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"valid keys: {', '.join(SPEC_KEYS)}"
            raise ConfigError(k, NO_VALUE, f"not a study key; {hint}")
    kw = dict(data)
    if "name" not in kw:
        raise ConfigError("name", NO_VALUE, "a study needs a name, e.g. name = \"warmup-grid\"")
    kw["axes"] = _flatten(kw.get("axes", {}), "", "axes")
    zips = kw.get("zip", [])
    if not isinstance(zips, list):
        raise ConfigError("zip", zips, "write zip groups as [[zip]] tables")
    kw["zip"] = [_flatten(g, "", f"zip[{i}]") for i, g in enumerate(zips)]
    for k in ("scientific", "nuisance", "seeds"):
        if k in kw and not isinstance(kw[k], list):
            raise ConfigError(k, kw[k], "expected a list")
    if not isinstance(kw.get("base", {}), dict):
        raise ConfigError("base", kw["base"], "expected a table of run options ([base.model], ...)")
    return StudySpec(**kw)


def load_spec(path: str | Path) -> StudySpec:
    """Read a study TOML file (see docs/studies.md for the format)."""

    return spec_from_dict(load_toml(path, "study file"))
