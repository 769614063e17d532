"""`normlab inspect` on tiny random GPT-2, Llama (GQA), OLMo-2, Gemma 2 and BERT saved locally:
family and placement printed, every statistic written, the report page opens in Chromium;
one statistic recomputed by hand; bad input fails in one line, exit 2, nothing written."""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "report"))
import tiny  # noqa: E402

from normlab.cli import main  # noqa: E402

pytest.importorskip("transformers")

FAMILIES = {  # family -> what the first printed line must say
    "gpt2": "family GPT-2; placement pre; norm layernorm",
    "llama": "family Llama; placement pre; norm rmsnorm",
    "olmo2": "family OLMo-2; placement post_branch; norm rmsnorm; QK-norm",
    "gemma2": "family Gemma 2; placement sandwich; norm rmsnorm_1p",
    "bert": "family BERT; placement post; norm layernorm; bidirectional",
}
PER_STREAM = ("rms", "mean_sq", "max_abs", "token_cos", "grad_norm", "angular_distance_to_last")
PER_BLOCK = ("grad_norm", "deletion_loss", "deletion_delta", "block_influence", "angular_distance")
ARGS = ["--context", "32", "--max-tokens", "96", "--quiet"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> str:
    import os

    d = os.environ.get("NORMLAB_DATA_DIR")
    if not d or not (Path(d) / "tinyshakespeare.txt").is_file():
        pytest.skip("Tiny Shakespeare not available (set NORMLAB_DATA_DIR)")
    return (Path(d) / "tinyshakespeare.txt").read_text(encoding="utf-8")


def _rows(out: Path) -> list[dict]:
    with (out / "probe.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("family", list(FAMILIES))
def test_inspect_each_family(family: str, corpus: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tiny.save(family, corpus, tmp_path / family)
    out = tmp_path / "out"
    assert main(["inspect", str(model), "--out", str(out), *ARGS]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[0].startswith(FAMILIES[family])
    assert ("inspect-only" in printed.splitlines()[0]) == (family == "bert")
    for name in ("probe.csv", "summary.json", "probe_config.json", "analysis/analysis.csv",
                 "analysis/layer_pairs.csv", "analysis/analysis.json"):
        assert (out / name).is_file(), name
    rows = _rows(out)
    have = {(r["metric"], r["sublayer"], int(r["layer"])) for r in rows if math.isfinite(float(r["value"]))}
    for layer in range(3):  # x_0, x_1, x_2
        assert all((m, "stream", layer) in have for m in PER_STREAM), layer
    for layer in (1, 2):
        assert all((m, "block", layer) in have for m in PER_BLOCK), layer
        assert ("max_logit", "attn", layer) in have and ("cos", "block", layer) in have
    assert ("log_z", "model", 0) in have and ("loss", "model", 0) in have
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tokens"] == 96 and summary["n_layer"] == 2 and 3.0 < summary["loss"] < 7.0
    pairs = json.loads((out / "analysis" / "analysis.json").read_text())["angular_distance"]
    assert len(pairs) == 3 and all(pairs[i][i] == pytest.approx(0, abs=1e-3) for i in range(3))
    # the page renders without special-casing, and opens in a browser
    assert main(["report", str(out)]) == 0
    page = out / "report" / "index.html"
    name = FAMILIES[family].split(";")[0].removeprefix("family ")
    assert name in page.read_text()  # summary.json (family, placement) is on the page
    from test_pages import browse

    lay = browse(page, tmp_path, f"inspect-{family}")
    figs = {p.stem for p in (out / "report" / "figures").glob("*.png")}
    assert {"layers_stream", "layers_block_grad", "layers_angle", "layers_deletion", "layers_max_logit"} <= figs
    assert lay["n"] == len(figs) and lay["bad"] == 0, lay
    assert not lay["errors"] and lay["wide"] == 0, lay


def test_angular_distance_by_hand_on_gpt2(corpus: str, tmp_path: Path) -> None:
    """arccos(cos(x_0, x_1))/pi averaged over tokens, from transformers' output_hidden_states."""
    model = tiny.save("gpt2", corpus, tmp_path / "gpt2")
    text = tmp_path / "text.txt"
    text.write_text(corpus[:5000], encoding="utf-8")
    out = tmp_path / "out"
    assert main(["inspect", str(model), "--out", str(out), "--text", str(text), *ARGS]) == 0
    import transformers

    hf = transformers.GPT2LMHeadModel.from_pretrained(model).eval()
    tok = transformers.AutoTokenizer.from_pretrained(model)
    ids = tok(corpus[:5000], add_special_tokens=False)["input_ids"]
    x = torch.tensor([ids[i * 32:(i + 1) * 32] for i in range(3)])
    with torch.no_grad():
        hs = hf(x, output_hidden_states=True).hidden_states  # (emb, block 1, block 2 + ln_f)
    a, b = hs[0].double(), hs[1].double()
    cos = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))
    by_hand = (torch.arccos(cos) / math.pi).mean().item()
    res = json.loads((out / "analysis" / "analysis.json").read_text())
    assert res["angular_distance"][0][1] == pytest.approx(by_hand, abs=1e-5)
    assert res["angular_distance"][0][1] > 0.05  # the blocks move the stream: not a vacuous match
    row = next(r for r in _rows(out) if r["metric"] == "angular_distance" and r["layer"] == "1")
    assert float(row["value"]) == pytest.approx(by_hand, abs=1e-5)


def test_imported_model_measures_like_the_original(corpus: str, tmp_path: Path) -> None:
    """The same Llama through both paths (transformers hooks, TransformerLM) gives the same numbers."""
    model = tiny.save("llama", corpus, tmp_path / "llama")
    assert main(["import", str(model), str(tmp_path / "lab")]) == 0
    assert main(["inspect", str(model), "--out", str(tmp_path / "a"), *ARGS]) == 0
    assert main(["inspect", str(tmp_path / "lab"), "--out", str(tmp_path / "b"), *ARGS]) == 0
    ra, rb = (json.loads((tmp_path / d / "analysis" / "analysis.json").read_text()) for d in "ab")
    for key in ("loss", "log_z"):
        assert ra[key] == pytest.approx(rb[key], abs=1e-5)
    for key in ("deletion_loss", "rms", "cos", "attn_max_logit", "grad_norm_block", "grad_norm_stream"):
        assert ra[key] == pytest.approx(rb[key], rel=1e-4, abs=1e-6), key


def _fails(argv: list[str], out: Path, capsys: pytest.CaptureFixture[str], match: str) -> None:
    args = argv + [str(out)] if argv[0] == "import" else argv + ["--out", str(out), "--quiet"]
    capsys.readouterr()  # drop what building the models printed
    assert main(args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and match in err, err
    assert not out.exists()


def test_bad_input_is_one_line_and_writes_nothing(corpus: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    import transformers

    unknown = tmp_path / "opt"
    transformers.OPTConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, ffn_dim=32,
                           num_attention_heads=2).save_pretrained(unknown)
    _fails(["inspect", str(unknown)], tmp_path / "o1", capsys, "unknown architecture model_type='opt'; known: gpt2")
    bare = tiny.save("gpt2", corpus, tmp_path / "bare", with_tokenizer=False)
    _fails(["inspect", str(bare)], tmp_path / "o2", capsys, "no tokenizer found")
    model = tiny.save("llama", corpus, tmp_path / "llama")
    short = tmp_path / "short.txt"
    short.write_text("To be, or not", encoding="utf-8")
    _fails(["inspect", str(model), "--text", str(short)], tmp_path / "o3", capsys, "shorter than one context")
    _fails(["inspect", str(tmp_path / "nowhere")], tmp_path / "o4", capsys, "neither a run directory")
    _fails(["import", str(tiny.save("bert", corpus, tmp_path / "b"))], tmp_path / "o5", capsys, "inspect-only")


def test_inspect_a_lab_run(data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    assert main(["train", "--preset", "smoke", "--placement", "post_branch", "--out", str(run), "--quiet",
                 "--set", "train.steps=4", "--set", "train.device=cpu", "--set", "train.eval_every=4"]) == 0
    capsys.readouterr()
    out = tmp_path / "out"
    assert main(["inspect", str(run), "--out", str(out), "--max-tokens", "64", "--quiet"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith(
        "family normlab TransformerLM; placement post_branch; norm layernorm")
    res = json.loads((out / "analysis" / "analysis.json").read_text())
    assert len(res["rms"]) == 3 and 3.0 < res["loss"] < 4.5  # a char model at 4 steps: near log(65)
    assert all(math.isfinite(v) for v in res["attn_max_logit"] + res["grad_norm_block"])
