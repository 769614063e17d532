"""A statistic is one registered object: the probe, the in-training diagnostics, inspect,
analyze and the probe and run pages all pick it up from the registry, with its labels."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch

from normlab import ModelConfig, TransformerLM
from normlab.core.fsutil import read_jsonl
from normlab.diagnostics.catalogue import STATISTICS
from normlab.diagnostics.probe import probe_model
from normlab.diagnostics.statistic import Statistic, chosen


def _mean(c):  # mean entry of each stream state x_0..x_L
    return c.stream.stacked.mean(dim=(1, 2, 3))


@pytest.fixture
def throwaway():
    """Two statistics added through the public API, removed again afterwards."""
    added = [Statistic("test_mean", "states", {"stream"}, "mean entry of the stream state", _mean, "mean of x_l"),
             Statistic("test_logit_max", "scalar", {"logits"}, "largest logit", lambda c: c.logits.amax(),
                       "max logit")]
    for s in added:
        STATISTICS.add(s.name, s)
    try:
        yield added
    finally:
        for s in added:
            STATISTICS.remove(s.name)
    assert "test_mean" not in STATISTICS


def _model(n_layer: int = 2) -> tuple[TransformerLM, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=13, context=8, n_layer=n_layer, d_model=8, n_head=2,
                                      placement="pre", init="xavier"))
    g = torch.Generator().manual_seed(3)
    return model, torch.randint(0, 13, (2, 8), generator=g), torch.randint(0, 13, (2, 8), generator=g)


def test_registered_statistic_is_in_probe_rows(throwaway) -> None:
    model, idx, tgt = _model()
    rows = {(li, s, p, m): v for li, s, p, m, v in probe_model(model, idx, tgt, n_proj=0)}
    mine = {k: v for k, v in rows.items() if k[3] == "test_mean"}
    assert sorted(mine) == [(li, "stream", "x", "test_mean") for li in range(3)]  # x_0..x_L
    with torch.no_grad():  # the stream by hand, block after block
        states = [model.stream.begin(model.embed(idx))]
        for b in model.blocks:
            states.append(b(states[-1]))
    for li, x in enumerate(states):
        assert mine[(li, "stream", "x", "test_mean")] == pytest.approx(x.mean().item(), rel=1e-5, abs=1e-7)
    assert rows[(0, "model", "test_logit_max", "test_logit_max")] == pytest.approx(model(idx)[0].max().item(),
                                                                                    rel=1e-6)


def _csv_rows(path) -> list[dict]:
    import csv

    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow
def test_registered_statistic_appears_everywhere(throwaway, tmp_path, data_dir) -> None:
    """probe rows, diagnostics.jsonl, ``inspect`` and ``analyze`` output, the probe and run pages."""
    from normlab.diagnostics.probe import ProbeConfig, run_probe, write_csv
    from normlab.inspect import inspect_model
    from normlab.report import build_report
    from normlab.report.diag import diag_matrices
    from normlab.run.resolve import resolve
    from normlab.train import run_training

    cfg = resolve(None, None, "pre", ["model.n_layer=2", "model.d_model=16", "model.n_head=2", "model.context=16",
                                      "train.batch_size=2", "train.steps=2", "train.eval_every=1",
                                      "train.eval_batches=1", "train.log_every=1", "train.threads=1",
                                      "train.diag_every=1", f"data.data_dir={data_dir}"])
    run = tmp_path / "run"
    run_training(cfg, run, quiet=True)
    lines = read_jsonl(run / "diagnostics.jsonl")
    assert len(lines) == 2
    for line in lines:
        assert len(line["test_mean"]) == 3 and all(isinstance(v, float) for v in line["test_mean"])
        assert isinstance(line["test_logit_max"], float)
        assert len(line["rms"]) == 3 and len(line["grad_norm"]) == 4  # the built-ins are still there
    steps, labels, m = diag_matrices(lines, n_layer=2)["test_mean"]
    assert labels == ["x0", "x1", "x2"] and m.shape == (3, 2)
    assert m[:, 1].tolist() == pytest.approx(lines[1]["test_mean"])
    assert diag_matrices(lines, n_layer=2)["grad_norm"][1] == ["emb", 1, 2, "head"]
    html = build_report(run).read_text()  # analyses the checkpoint for the layer section
    figures = re.findall(r'<figure id="fig-([^"]+)"', html)
    assert {"heat_test_mean", "diag_test_logit_max", "layer_similarity", "layer_deletion"} <= set(figures)
    assert "Mean entry of the stream state. test_mean per stream x_l" in html  # help and row axis
    assert "Largest logit, against training step" in html
    # analyze: its rows and analysis.json; the logits it does not capture leave test_logit_max out
    mine = [r for r in _csv_rows(run / "analysis" / "analysis.csv") if r["metric"] == "test_mean"]
    assert [(r["layer"], r["sublayer"]) for r in mine] == [("0", "stream"), ("1", "stream"), ("2", "stream")]
    res = json.loads((run / "analysis" / "analysis.json").read_text())
    assert [float(r["value"]) for r in mine] == res["test_mean"] and "test_logit_max" not in res
    # inspect of the same run: probe.csv, drawn on its probe page
    out = tmp_path / "inspect"
    inspect_model(str(run), out, str(data_dir / "tinyshakespeare.txt"), context=16, max_tokens=32, quiet=True)
    got = [r for r in _csv_rows(out / "probe.csv") if r["metric"] == "test_mean"]
    assert len(got) == 3 and all(math.isfinite(float(r["value"])) for r in got)
    assert "layers_test_mean" in re.findall(r'<figure id="fig-([^"]+)"', build_report(out).read_text())
    # the probe: rows, and a figure on its page
    probe = tmp_path / "probe"
    pc = ProbeConfig(placements=["pre"], depths=[1, 2], d_model=8, n_head=2, seeds=1, batch_size=2, context=4,
                     data="random", n_proj=0)
    write_csv(run_probe(pc), probe / "probe.csv")
    (probe / "probe_config.json").write_text(json.dumps({"data": "random"}))
    assert sum(r["metric"] == "test_mean" for r in _csv_rows(probe / "probe.csv")) == 2 + 3  # x_0..x_L, L = 1, 2
    assert "layers_test_mean" in re.findall(r'<figure id="fig-([^"]+)"', build_report(probe).read_text())


def test_two_statistics_writing_one_key_are_refused() -> None:
    a = Statistic("a", "blocks", {"stream"}, "a", _mean, key="same")
    b = Statistic("b", "blocks", {"stream"}, "b", _mean, key="same")
    with pytest.raises(ValueError, match="both write 'same'"):
        chosen([a, b], "training", {"stream"})
    assert chosen([a, b], "training", set()) == []  # what a tool does not capture is skipped
    with pytest.raises(ValueError, match="over='layers'"):
        Statistic("c", "layers", {"stream"}, "c", _mean)
    with pytest.raises(ValueError, match="draw='pie'"):
        Statistic("d", "blocks", {"stream"}, "d", _mean, draw=("pie",))
    # a statistic that declares no figure gets the one of its ``over``
    assert [f.kind for f in Statistic("e", "pairs", {"stream"}, "e", _mean).figures()] == ["matrix"]


def test_a_misspelt_need_is_refused_naming_the_valid_ones() -> None:
    """A need no tool captures would never be met: the statistic would silently never be computed."""
    from normlab.diagnostics.statistic import NEEDS

    with pytest.raises(ValueError, match=r"needs 'stram', which no tool captures; use names from stream, aux, ") as e:
        Statistic("typo", "states", {"stram"}, "mean entry", _mean)
    assert all(n in str(e.value) for n in NEEDS)
    with pytest.raises(ValueError, match="give a set of names"):  # a bare string would be its letters
        Statistic("bare", "states", "stream", "mean entry", _mean)  # type: ignore[arg-type]
    # every built-in statistic needs only declared names, and the tools capture only declared names
    assert all(s.needs <= set(NEEDS) for _, s in STATISTICS.items())
    with pytest.raises(ValueError, match="probe captures 'gradz', not in statistic.NEEDS"):
        chosen([], "probe", {"stream", "gradz"})


def test_what_the_probe_captures_is_declared() -> None:
    from normlab.diagnostics.capture import probe_capture
    from normlab.diagnostics.statistic import NEEDS
    from normlab.diagnostics.subject import as_subject

    model, idx, tgt = _model()
    c = probe_capture(as_subject(model), idx, tgt, 1, torch.Generator().manual_seed(0), set(NEEDS))
    assert {"stream", "loss", "param_grads", "jacobian", "norm_inputs", "grad_stats"} <= c.provided <= set(NEEDS)


def test_every_need_is_described_in_the_table() -> None:
    """The module docstring's table says what each need holds and which tool captures it."""
    import normlab.diagnostics.statistic as statistic

    described = set(re.findall(r"^\| (\w+) *\|", statistic.__doc__ or "", re.M))
    measured = {"deletion", "state_grads", "block_grads", "log_z", "max_logit"}  # the paragraph below the table
    assert set(statistic.NEEDS) - measured <= described
    assert all(f"``{n}``" in (statistic.__doc__ or "") for n in measured)
