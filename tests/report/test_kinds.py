"""What makes a page fit its subject: its kind decides title and question (an inspected
checkpoint is not a probe at init), one colour per series on every page, whole-number ticks
on layer and step axes, comparison labels that tell runs apart, and a study answering its
own question with the numbers."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import synth  # noqa: E402

from normlab.report import figures as F  # noqa: E402
from normlab.report.style import color, series_names, split_label  # noqa: E402


def test_every_registered_series_has_its_own_colour() -> None:
    from normlab.model.catalogue import LAYOUTS, PLACEMENTS

    names = series_names()
    assert names[:len(PLACEMENTS)] == PLACEMENTS.names() and set(LAYOUTS.names()) <= set(names)
    assert "layerscale" in names
    colours = [color(n) for n in names]
    assert len(set(colours)) == len(colours), dict(zip(names, colours))
    # other series never take a registered colour
    assert not {color("gpt2"), color("baseline"), color("train")} & set(colours)


def test_a_placement_registered_later_gets_a_new_colour() -> None:
    from normlab.model.catalogue import PLACEMENTS

    before = {color(n) for n in series_names()}
    PLACEMENTS.add("test_scaled_pre", object())
    try:
        assert color("test_scaled_pre") not in before
    finally:
        PLACEMENTS.remove("test_scaled_pre")


def test_labels_find_their_series() -> None:
    assert split_label("post warmup_steps=50") == ("post", "warmup_steps=50")
    assert split_label("s1: pre lr=0.001") == ("pre", "s1: lr=0.001")
    assert split_label("placement=pre, optim.lr=0.001") == ("pre", "optim.lr=0.001")
    assert split_label("post+qk_layernorm") == ("post", "+qk_layernorm")
    assert split_label("qk_norm=none") == ("qk_norm=none", "")  # a field value is not a placement


def _line_colours(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, set[str]]]:
    """{figure name: {series: colours of its lines}} of every figure a page draws."""
    from matplotlib.colors import to_hex

    from normlab.report.html import Page

    seen: dict[str, dict[str, set[str]]] = {}
    draw = Page.figure

    def spy(self, fig, name, caption, wide=False):  # noqa: ANN001, ANN202
        by: dict[str, set[str]] = {}
        for ax in fig.axes:
            for ln in ax.get_lines():
                if not ln.get_label().startswith("_") and len(ln.get_xdata()):
                    by.setdefault(split_label(ln.get_label())[0], set()).add(to_hex(ln.get_color()))
        seen[f"{self.out_dir.parent.name}/{name}"] = by
        return draw(self, fig, name, caption, wide)

    monkeypatch.setattr(Page, "figure", spy)
    return seen


def test_same_placement_same_colour_on_every_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from normlab.report import build_report, compare_report

    seen = _line_colours(monkeypatch)
    build_report(synth.write_probe(tmp_path / "probe"))
    build_report(synth.write_store(tmp_path / "study", seeds=(0, 1)))
    compare_report([synth.write_run(tmp_path / "a", "pre"), synth.write_run(tmp_path / "b", "post")],
                   tmp_path / "cmp" / "out")
    per: dict[str, set[str]] = {}
    for by in seen.values():
        for series, cs in by.items():
            per.setdefault(series, set()).update(cs)
    pages = {name.split("/")[0] for name, by in seen.items() if "pre" in by}
    assert pages == {"probe", "study", "cmp"}, seen.keys()  # "pre" is drawn on all three pages
    assert per["pre"] == {color("pre").lower()} and per["post"] == {color("post").lower()}
    assert color("pre") != color("post")


def test_layer_and_step_axes_have_whole_ticks() -> None:
    layers = np.array([1.0, 2.0, 3.0])
    fig = F.layer_profile({"pre": (layers, np.array([[1.0, 2.0, 1.5]]))}, "g", "t")
    ax = fig.axes[0]
    fig.canvas.draw()
    lo, hi = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks
    steps = F.seed_curves({"pre": [F.Trace([0, 1, 2, 3], [4.0, 3.0, 2.5, 2.4])]}, "step", "loss", "t").axes[0]
    steps.figure.canvas.draw()
    lo, hi = steps.get_xlim()
    assert all(float(t).is_integer() for t in steps.get_xticks() if lo <= t <= hi)


def test_comparison_labels_come_from_the_fields_that_differ() -> None:
    from normlab.report.compare import run_labels

    base = {"model": {"placement": "pre", "n_layer": 2}, "optim": {"lr": 1e-3}, "seed": 0, "name": "x"}
    other = {**base, "model": {"placement": "post", "n_layer": 2}, "optim": {"lr": 3e-4}, "name": "y"}
    assert run_labels([base, other], ["2026-01-01", "2026-01-01b"]) == ["placement=pre, optim.lr=0.001",
                                                                       "placement=post, optim.lr=3e-4"]
    same = run_labels([base, dict(base)], ["20260101-120000", "20260101-130000"])
    assert len(set(same)) == 2 and same[0].endswith("20260101-120000")  # identical configs: the directories
    many = [{**base, "seed": s, "optim": {"lr": lr}, "train": {"steps": st}, "data": {"x": x}}
            for s, lr, st, x in [(0, 1e-3, 10, 1), (0, 1e-3, 10, 2), (1, 1e-3, 10, 1)]]
    labels = run_labels(many, ["a", "b", "c"])
    assert len(set(labels)) == 3, labels


def _write_inspect(d: Path) -> Path:
    """The files `normlab inspect` writes, for a 3-block checkpoint (probe.csv rows in its format)."""
    L = 3
    base = {"placement": "pre", "init": "tiny-gpt2", "n_layer": L, "d_model": 16, "seed": 0}
    rows = [{**base, "layer": 0, "sublayer": "model", "param": p, "metric": m, "value": v}
            for p, m, v in (("loss", "loss", 3.2), ("logits", "log_z", 4.0))]
    angle = [[abs(i - j) * 0.1 for j in range(L + 1)] for i in range(L + 1)]
    stream = {"rms": [1.0, 2.0, 3.0, 5.0], "mean_sq": [1.0, 4.0, 9.0, 25.0], "max_abs": [2.0] * 4,
              "token_cos": [0.1] * 4, "grad_norm": [0.5] * 4, "angular_distance_to_last": [a[L] for a in angle]}
    for li in range(L + 1):
        rows += [{**base, "layer": li, "sublayer": "stream", "param": "x", "metric": m, "value": v[li]}
                 for m, v in stream.items() if li < len(v)]
    deletion = [4.0, 3.3, 3.5]
    block = {"grad_norm": [0.3, 0.2, 0.1], "deletion_loss": deletion, "deletion_delta": [x - 3.2 for x in deletion],
             "block_influence": [0.2] * L, "angular_distance": [angle[i][i + 1] for i in range(L)],
             "cos": [0.9] * L}
    for li in range(1, L + 1):
        rows += [{**base, "layer": li, "sublayer": "block", "param": "all", "metric": m, "value": v[li - 1]}
                 for m, v in block.items()]
        rows.append({**base, "layer": li, "sublayer": "attn", "param": "all", "metric": "max_logit",
                     "value": [5.0, 7.0, 6.0][li - 1]})
    d.mkdir(parents=True)
    with (d / "probe.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (d / "summary.json").write_text(json.dumps({"model": "tiny-gpt2", "family": "GPT-2", "placement": "pre",
                                                "norm": "layernorm", "n_layer": L, "d_model": 16, "params": 5000,
                                                "tokens": 96, "text": "text.txt", "loss": 3.2, "causal": True}))
    (d / "probe_config.json").write_text(json.dumps({"model": "tiny-gpt2", "max_tokens": 96}))
    return d


def test_an_inspected_checkpoint_is_not_a_probe_at_init(tmp_path: Path) -> None:
    import re

    from normlab.report import build_report
    from normlab.report.kinds import page_kind

    d = _write_inspect(tmp_path / "inspect")
    assert page_kind(d) == "inspect" and page_kind(synth.write_probe(tmp_path / "probe")) == "probe"
    html = build_report(d).read_text()
    title = re.search(r"<title>(.*?)</title>", html)[1]
    lead = re.search(r'<section class="lead".*?</section>', html, flags=re.S)[0]
    assert title == "Inspected checkpoint: tiny-gpt2" and "probe" not in title
    assert "initialisation" not in lead and "scale with depth" not in lead
    assert "family GPT-2, placement pre" in lead and "loss is 3.2 nats/token" in lead
    assert "skipping block 1 costs most (+0.8 nats/token), block 2 least (+0.1)" in lead
    assert "slope vs log L" not in html  # one depth: no depth slope column


def test_study_answers_pre_vs_post_per_warmup() -> None:
    from normlab.report.numbers import num
    from normlab.report.study_answer import contrast
    from normlab.stats.effects import welch

    post0, pre0 = [2.0, 2.1, 2.2, 2.05], [1.6, 1.62, 1.65, 1.61]
    post5, pre5 = [1.9, 1.95, 2.0, 1.92], [1.61, 1.6, 1.64, 1.63]
    pts = []
    for pl, wu, vals in (("post", 0, post0), ("pre", 0, pre0), ("post", 50, post5), ("pre", 50, pre5)):
        pts += [({"model.placement": pl, "optim.warmup_steps": wu, "seed": s}, (v, "ok")) for s, v in enumerate(vals)]
    answer, notes = contrast(pts, "model.placement", ["post", "pre"])
    e = welch(post0, pre0)
    assert answer.startswith("warm-up 0: Pre-LN 1.62 ± 0.022 vs Post-LN 2.087 ± 0.085 (4 seeds each): Pre-LN lower by")
    assert f"95% interval [{num(e.lo, 3)}, {num(e.hi, 3)}]" in answer and "warm-up 50: Pre-LN" in answer
    assert any(n.startswith("Post-LN: warm-up 50 ") and "warm-up 50 lower by" in n for n in notes), notes


def test_every_kind_has_a_title_and_a_question() -> None:
    from normlab.report.kinds import KINDS, heading

    facts = {"name": "n", "label": "pre", "what": "w", "model": "m", "text": "t", "question": "q?",
             "names": ["a", "b"]}
    heads = {k: heading(k, **facts) for k in KINDS}
    assert len({h.title for h in heads.values()}) == len(KINDS)
    assert all(h.question.endswith("?") for h in heads.values()), heads
    assert heads["series"].title == "Checkpoint series: n"


def test_comparing_a_checkpoint_with_a_probe_is_not_about_init_only(tmp_path: Path) -> None:
    import re

    from normlab.report import compare_report

    html = compare_report([_write_inspect(tmp_path / "ckpt"), synth.write_probe(tmp_path / "probe")],
                          tmp_path / "cmp").read_text()
    lead = re.search(r'<section class="lead".*?</section>', html, flags=re.S)[0]
    assert re.search(r"<title>(.*?)</title>", html)[1] == "Comparison of models: ckpt vs probe"
    assert "How do the blocks of these models compare?" in lead and "probe: post, pre" in lead
    assert "ckpt: On 96 tokens of text.txt: its loss is 3.2" in lead and "W2 depth slopes post +" in lead
