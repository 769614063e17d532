"""The hint an error gives names what the user meant: an option under its usual names
elsewhere (learning_rate is optim.lr), and a malformed table as malformed, not as a name."""

from __future__ import annotations

import re

import pytest

from normlab.core.errors import ConfigError
from normlab.run.resolve import resolve


@pytest.mark.parametrize("typed, meant", [
    ("optim.learning_rate", "optim.lr"),      # by spelling alone: optim.min_lr
    ("model.learning_rate", "optim.lr"),      # in another section
    ("lr", "optim.lr"), ("train.bs", "train.batch_size"), ("optim.wd", "optim.weight_decay"),
    ("model.num_layers", "model.n_layer"), ("model.hidden_size", "model.d_model"), ("model.n_embd", "model.d_model"),
    ("model.block_size", "model.context"), ("train.max_iters", "train.steps"), ("optim.minlr", "optim.min_lr"),
    ("model.n_layr", "model.n_layer"), ("optim.warmup", "optim.warmup_steps"), ("optim.l", "optim.lr"),
])
def test_unknown_key_suggests_the_option_meant_not_the_nearest_spelling(typed, meant):
    with pytest.raises(ConfigError, match=rf"^{re.escape(typed)}: no such option; did you mean '{re.escape(meant)}'\?$"):
        resolve(overrides=[f"{typed}=1"])


def test_unknown_key_without_a_likely_meaning_lists_the_keys():
    with pytest.raises(ConfigError, match=r"^zzzz: no such option; valid keys: model\.vocab_size, "):
        resolve(overrides=["zzzz=1"])


@pytest.mark.parametrize("text, form", [('{name="keel", alpha=}', "TOML table"), ('{name="keel"', "TOML table"),
                                        ('["post", pre]', "TOML list")])
def test_a_malformed_table_or_list_in_set_says_so_naming_the_option(text, form):
    with pytest.raises(ConfigError) as e:
        resolve(overrides=[f"model.placement={text}"])
    msg = str(e.value)
    assert msg.startswith(f"model.placement={text!r}: malformed (") and form in msg, msg
    assert "unknown name" not in msg and "\n" not in msg


def test_a_bare_word_is_still_a_name():
    with pytest.raises(ConfigError, match=r"^model\.placement='prenrm': unknown name"):
        from normlab.model.build import resolve_model

        resolve_model(resolve(overrides=["model.placement=prenrm"]).model)
