"""Extending the lab from outside the package: a placement with an option is its class, its
formula test and one registry line; it then trains from a TOML file like a built-in one."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import torch

from normlab import ModelConfig, TransformerLM
from normlab.cli import main
from normlab.core.errors import ConfigError
from normlab.core.schema import doc
from normlab.model.build import resolve_model
from normlab.model.catalogue import PLACEMENTS
from normlab.model.placement import Placement, PlacementOptions


class ScaledPre(Placement):
    """Pre-LN with the branch output scaled by a constant (a throwaway placement for this test)."""

    @dataclass
    class Options(PlacementOptions):
        scale: float = doc("factor on the branch output", 1.0)

        def __post_init__(self) -> None:
            self.check(self.scale > 0, "scale", "must be > 0, e.g. 0.5")

    formula = "x <- x + c * F(LN(x))"
    source = "tests/architecture"

    def __init__(self, branch: torch.nn.Module, site) -> None:
        super().__init__(branch, site)
        self.norm = site.norm()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.options.scale * self.branch(self.norm(x))


@pytest.fixture
def scaled_pre():
    PLACEMENTS.add("scaled_pre", ScaledPre)  # the catalogue line
    try:
        yield "scaled_pre"
    finally:
        PLACEMENTS.remove("scaled_pre")


def test_formula_by_hand(scaled_pre) -> None:
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=11, context=6, n_layer=2, d_model=8, n_head=2,
                                      placement={"name": scaled_pre, "scale": 0.25})).double().eval()
    idx = torch.randint(0, 11, (2, 6))
    x = model.embed(idx)
    for block in model.blocks:
        for sub in (block.attn, block.ffn):
            assert sub.options.scale == 0.25
            x = x + 0.25 * sub.branch(sub.norm(x))
    ref = model.lm_head(model.norm_f(x))
    assert torch.allclose(model(idx)[0], ref, atol=1e-10, rtol=0)


def test_options_are_validated_and_listed(scaled_pre, capsys) -> None:
    cfg = ModelConfig(n_layer=2, d_model=16, n_head=2, placement={"name": scaled_pre, "scale": -1.0})
    with pytest.raises(ConfigError, match=r"^model\.placement\.scale=-1\.0: must be > 0, e.g\. 0\.5$"):
        resolve_model(cfg)
    assert main(["placements"]) == 0
    out = capsys.readouterr().out
    assert "scaled_pre" in out and "scaled_pre.scale (a number, default 1.0): factor on the branch output" in out
    assert main(["config", "--explain"]) == 0
    assert "scaled_pre.scale" in capsys.readouterr().out


def test_trains_two_steps_from_toml(scaled_pre, tmp_path, capsys) -> None:
    toml = tmp_path / "run.toml"
    toml.write_text(f"""
[model]
n_layer = 2
d_model = 16
n_head = 2
context = 16
placement = [{{name = "{scaled_pre}", scale = 0.5}}, {{attn = "pre", ffn = {{name = "{scaled_pre}", scale = 2.0}}}}]

[train]
steps = 2
batch_size = 2
eval_batches = 1
threads = 1
""")
    run = tmp_path / "run"
    assert main(["train", "--config", str(toml), "--out", str(run), "--quiet"]) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 2
    stored = json.loads((run / "config.json").read_text())["model"]["placement"]
    assert stored[1] == {"attn": "pre", "ffn": {"name": scaled_pre, "scale": 2.0}}
    model = TransformerLM.load(run / "checkpoints" / "latest")  # the run directory describes itself
    scales = [sub.options.__dict__.get("scale") for b in model.blocks for sub in (b.attn, b.ffn)]
    assert scales == [0.5, 0.5, None, 2.0]


class HalfNorm(torch.nn.Module):
    """LayerNorm times 0.5: a throwaway norm."""

    formula = "0.5 * LN(x)"
    source = "tests/architecture"

    def __init__(self, d: int, eps: float = 1e-5, bias: bool = True) -> None:
        super().__init__()
        self.ln = torch.nn.LayerNorm(d, eps=eps, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * self.ln(x)


def test_a_registered_norm_is_captured() -> None:
    """Capture hooks come from the norm registry: a norm registered later is recorded too."""
    from normlab.diagnostics.hooks import recording
    from normlab.diagnostics.subject import as_subject
    from normlab.model.catalogue import NORMS

    NORMS.add("half", HalfNorm)
    try:
        model = TransformerLM(ModelConfig(vocab_size=11, context=6, n_layer=2, d_model=8, n_head=2, placement="pre",
                                          norm="half"))
        with recording(as_subject(model), norms=True) as rec:
            model(torch.randint(0, 11, (1, 6)))
        own = sorted(rec.norm_in)  # the norm's own nn.LayerNorm inside it is not listed again
        assert own == ["blocks.0.attn.norm", "blocks.0.ffn.norm", "blocks.1.attn.norm", "blocks.1.ffn.norm", "norm_f"]
    finally:
        NORMS.remove("half")
