"""Study spec fields of the wrong type or naming nothing: one line naming the field, exit 2, no store.

Each case was accepted (and trained the whole study) or raised a traceback before the
fields were type-checked and the metric checked against the trial's summary entries.
"""

from __future__ import annotations

import pytest

from normlab.cli import main

from .conftest import tiny_spec

CASES = {
    "name = 5": ("name", "must be a string"),
    'name = ["x"]': ("name", "must be a string"),
    "trial = 3": ("trial", "expected a string"),
    'metric = "best_val_los"': ("metric", "did you mean 'best_val_loss'"),
    "metric = 1": ("metric", "name a summary entry"),
    "runs_dir = 7": ("runs_dir", "expected a string"),
    "retries = true": ("retries", "integer"),
}


@pytest.mark.usefixtures("data_dir")  # a spec that slipped through would train on the corpus
@pytest.mark.parametrize("line", list(CASES))
def test_wrong_study_field_is_one_line_exit_2_and_no_store(line, tmp_path, capsys):
    field, needle = CASES[line]
    key = line.split(" = ")[0]
    spec = tiny_spec(tmp_path / "s.toml", steps=1, every=1, ckpt=1, seeds="[0]", extra=line)
    if key == "name":  # tiny_spec writes its own name first: replace it
        spec.write_text(spec.read_text().replace('name = "tiny"\n', ""))
    store = tmp_path / "store"
    rc = main(["study", "run", str(spec), "--store", str(store), "--workers", "1"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.count("\n") == 1 and err.startswith(f"normlab study: error: {field}="), err
    assert needle in err, err
    assert not store.exists()


def test_the_metric_is_checked_against_the_trial_it_summarises():
    from normlab.core.errors import ConfigError
    from normlab.study.spec import StudySpec

    StudySpec(name="p", trial="probe", metric="w2_grad_last")
    StudySpec(name="c", trial="my.module:fn", metric="anything")  # custom trials name their own entries
    with pytest.raises(ConfigError, match="metric='best_val_loss': unknown name.*w2_grad_last"):
        StudySpec(name="p", trial="probe", metric="best_val_loss")
