"""The four walkthroughs of docs/architecture.md, done for real. Each recipe below makes the change
its heading describes in a copy of the checkout (``walkthrough_copy.Copy``), with the page's own
code for the new class or claim; git then names the files that changed, which must be the
heading's list, N of them. The tests that enforce the change pass in the copy (so the recipe is
complete), and with a listed file left out the test that enforces it fails there (so the count
holds no file a change could skip). A recipe that no longer fits the code fails naming its anchor.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from walkthrough_copy import Copy, page_code, walkthrough  # noqa: E402

# a copy, its git commit and two pytest runs in fresh interpreters: 10-30 s each
pytestmark = pytest.mark.slow


def counted(c: Copy, title: str) -> None:
    """The files the recipe changed are the heading's, and N is their number."""
    n, files = walkthrough(title)
    assert c.changed() == set(files), f"'{title}': git counts {sorted(c.changed())}, the heading {files}"
    assert n == len(files), f"'{title}': the heading says {n} files and lists {len(files)}"


def run(c: Copy, ids: list[str], want: str) -> None:
    """Each test of ``ids`` ends as ``want`` (PASSED, FAILED) in the copy."""
    got, out = c.pytest(*ids)
    wrong = {i: got.get(i, "not run") for i in ids if got.get(i) != want}
    assert not wrong, f"expected {want}: {wrong}\n{out[-4000:]}"


# ------------------------------------------------------------------ a placement with an option
PLACEMENT = "Adding a placement with an option"
FORMULAS = "tests/model/test_formulas.py"
DOCS = ["tests/docs/test_readme_lists.py::test_readme_lists_every_placement_and_norm",
        "tests/docs/test_doc_lists.py::test_placements_md_has_a_row_for_every_placement_and_layout",
        "tests/docs/test_doc_lists.py::test_placements_md_lists_the_options_of_every_placement_that_has_some"]


def test_placement_with_an_option(tmp_path: Path) -> None:
    c = Copy(tmp_path)
    c.append("src/normlab/model/placements.py", page_code(PLACEMENT))
    # after the last placement (README lists them in the registry's order)
    c.insert("src/normlab/model/catalogue.py", r"^PLACEMENTS\.add\(.*$(?!\nPLACEMENTS\.add\()",
             'PLACEMENTS.add("gain_pre", placements.GainPre)')
    c.insert(FORMULAS, r"^SINGLE = \{$", '    "gain_pre": lambda s, x: x + s.g * F_(s, ln(x, s.norm)),')
    c.replace("README.md", "`mix`.", "`gain_pre`, `mix`.")  # the last placement, then the layouts
    c.insert("docs/placements.md", r"^\| `mix` \(layout\) \| `post` for",
             "| `gain_pre` | x <- x + g F(LN(x)), g learnable, = option `gain` at init | on | an example |", before=True)
    c.insert("docs/placements.md", r"^\| `mix` \(layout\) \| `fraction`",
             "| `gain_pre` | `gain`: g at initialisation, the factor on the branch output (> 0) | `1.0` | - |", before=True)
    counted(c, PLACEMENT)
    coverage = f"{FORMULAS}::test_every_registered_placement_has_a_formula_test"
    run(c, [f"{FORMULAS}::test_single_stream_block_matches_formula[gain_pre]", coverage, *DOCS], "PASSED")
    for rel in ("README.md", "docs/placements.md", FORMULAS):
        c.undo(rel)
    run(c, [coverage, *DOCS], "FAILED")  # each of these tests reads one of the files left out


# ------------------------------------------------------------------ a training claim
CLAIM = "Adding a training claim on an existing study"
WORLD = '''def xiong_pre_no_warmup(o: str) -> list:
    """pre-vs-post: Pre-LN without warm-up against with warm-up 50 (S: the same; C: 0.5 higher)."""
    return world(o, [("pre-vs-post", {P: "pre", W: 0}, T, T + 0.5), ("pre-vs-post", {P: "pre", W: 50}, T, T)])


'''
RULES, THEORY = "tests/claims/test_training_rules.py", "tests/docs/test_theory_tables.py"


def test_training_claim(tmp_path: Path) -> None:
    from normlab.claims.tables import END, START

    c = Copy(tmp_path)
    c.append("src/normlab/claims/catalogue/training.py", page_code(CLAIM))
    c.insert("tests/claims/worlds.py", r"^# claim id -> its world", WORLD, before=True)
    c.insert("tests/claims/worlds.py", r"^WORLDS = \{$", '    "xiong-pre-no-warmup": xiong_pre_no_warmup,')
    c.between("docs/theory.md", START, END, c.python("-m", "normlab.claims.tables"))  # as the page says
    counted(c, CLAIM)
    every = f"{RULES}::test_every_training_claim_has_a_synthetic_world"
    page = f"{THEORY}::test_theory_md_lists_the_catalogue_as_it_is"
    worlds = [f"{RULES}::test_training_claim_outcomes[xiong-pre-no-warmup-{o}]" for o in "SCI"]
    run(c, [every, *worlds, page, f"{THEORY}::test_section_4_counts_the_seed_claims"], "PASSED")
    c.undo("tests/claims/worlds.py")
    c.undo("docs/theory.md")
    run(c, [every, page], "FAILED")


# ------------------------------------------------------------------ a logger with a folder
LOGGER = "Adding a logger with a folder"
LOGGER_TEST = '''

def test_spreadsheet_rows_equal_metrics_jsonl(tmp_path, tiny):
    import csv

    run = tmp_path / "run"
    run_training(tiny.cfg('train.loggers=["spreadsheet"]'), run, quiet=True)
    with open(run / "spreadsheet" / "metrics.csv", newline="", encoding="utf-8") as fh:
        got = list(csv.DictReader(fh))
    rows = read_jsonl(run / "metrics.jsonl")
    assert [int(g["step"]) for g in got] == [r["step"] for r in rows] and len(rows) > 1
    for g, r in zip(got, rows):
        for key in ("train/loss", "val/loss", "lr"):
            assert (float(g[key]) if g[key] else None) == r.get(key), (key, g, r)
'''


def test_logger_with_a_folder(tmp_path: Path, data_dir: Path) -> None:  # noqa: ARG001 (the runs read the corpus)
    c = Copy(tmp_path)
    c.insert("src/normlab/train/loggers.py", r"^def make_loggers\(", page_code(LOGGER) + "\n\n", before=True)
    c.insert("src/normlab/train/catalogue.py", r'^loggers\.LOGGERS\.add\("wandb", ',
             'loggers.LOGGERS.add("spreadsheet", loggers.SpreadsheetLogger)')
    c.append("tests/train/test_loggers.py", LOGGER_TEST)
    c.replace("tests/train/test_logger_folder.py", '"wandb": "wandb", "plugin_lines"',
              '"wandb": "wandb", "spreadsheet": "spreadsheet", "plugin_lines"')
    c.insert("docs/training.md", r"^compares them with metrics\.jsonl step for step\.$",
             "`spreadsheet` writes `RUN/spreadsheet/metrics.csv`: step, train/loss, val/loss and lr of each\n"
             "metrics line (empty where the line has none; a resumed run appends).")
    c.replace("src/normlab/run/train_config.py", "metrics.jsonl: tensorboard, wandb, or one",
              "metrics.jsonl: tensorboard, wandb, spreadsheet, or one")
    counted(c, LOGGER)
    folders = "tests/train/test_logger_folder.py::test_a_plugin_logger_gets_its_folder_and_a_resumed_run_writes_on_in_it"
    run(c, ["tests/train/test_loggers.py::test_spreadsheet_rows_equal_metrics_jsonl", folders], "PASSED")
    c.undo("tests/train/test_logger_folder.py")
    run(c, [folders], "FAILED")


# ------------------------------------------------------------------ a statistic over data not yet captured
STATISTIC = "Adding a statistic that needs data not yet captured"
STAT, CAPTURE = "src/normlab/diagnostics/statistic.py", "src/normlab/diagnostics/capture.py"
STAT_TEST = '''

def test_sublayer_input_rms_is_what_each_sublayer_receives_by_hand() -> None:
    model, idx, tgt = _model()
    rows = {(li, s, p): v for li, s, p, m, v in probe_model(model, idx, tgt, n_proj=0) if m == "sublayer_input_rms"}
    want = {}
    with torch.no_grad():  # block l's attention receives x_(l-1); its FFN what the attention sub-layer returned
        x = model.stream.begin(model.embed(idx))
        for li, block in enumerate(model.blocks, 1):
            mid = block.attn(x)
            want[(li, "attn", "input")], want[(li, "ffn", "input")] = x.pow(2).mean().sqrt(), mid.pow(2).mean().sqrt()
            x = block.ffn(mid)
    assert rows.keys() == want.keys()
    assert all(rows[k] == pytest.approx(v.item(), rel=1e-5) for k, v in want.items())
'''
REGISTRY = "tests/diagnostics/test_statistic_registry.py"


def test_statistic_over_data_not_yet_captured(tmp_path: Path) -> None:
    helper, line = page_code(STATISTIC).split("\nSTATISTICS.add(")
    c = Copy(tmp_path)
    c.replace(STAT, '"grad_stats", "history",', '"grad_stats", "history", "sublayer_inputs",')
    c.insert(STAT, r"^    norm_inputs: dict\[str, torch\.Tensor\]",
             "    sublayer_inputs: dict[str, torch.Tensor] = field(default_factory=dict)  # blocks.{l}.{child}: its input")
    c.insert(STAT, r"^\| norm_inputs \|",
             "| sublayer_inputs | ``sublayer_inputs``: what each block's sub-layer received (``blocks.{l}.attn``, "
             "``.ffn``) | yes | no |")
    c.replace(CAPTURE, 'recording(subject, norms="norm_inputs" in needs)',
              'recording(subject, norms="norm_inputs" in needs,\n'
              '                                         inputs="sublayer_inputs" in needs)')
    c.insert(CAPTURE, r'^    c\.provided = \{"stream", "logits", "loss", "norm_inputs"\}$',
             '    if "sublayer_inputs" in needs:  # hooks.recording(inputs=True): what each sub-layer received\n'
             '        c.sublayer_inputs = rec.inputs\n        c.provided.add("sublayer_inputs")')
    c.insert("src/normlab/diagnostics/catalogue.py", r"^# -+ both$", helper.strip("\n") + "\n\n\n", before=True)
    c.insert("src/normlab/diagnostics/catalogue.py", r'^STATISTICS\.add\("loss", ', "STATISTICS.add(" + line,
             before=True)
    c.insert("docs/diagnostics.md", r"^\| `max_abs` ",
             "| `sublayer_input_rms` | sqrt(E‖x‖²/d) of what each block's sub-layer receives (probe) | - |")
    c.append(REGISTRY, STAT_TEST)
    counted(c, STATISTIC)
    mine = f"{REGISTRY}::test_sublayer_input_rms_is_what_each_sublayer_receives_by_hand"
    page = "tests/docs/test_doc_lists.py::test_diagnostics_md_names_every_registered_statistic"
    run(c, [mine, page, f"{REGISTRY}::test_every_need_is_described_in_the_table",
            f"{REGISTRY}::test_what_the_probe_captures_is_declared"], "PASSED")
    c.undo(CAPTURE)  # never captured: the statistic is silently not computed, and its test sees no rows
    c.undo("docs/diagnostics.md")
    run(c, [mine, page], "FAILED")
