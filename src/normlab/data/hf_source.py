"""``hf:NAME_OR_PATH``: a Hugging Face dataset as a text source, read from disk only.

A folder ``Dataset.save_to_disk`` wrote is opened with ``load_from_disk``; anything else goes
to ``load_dataset`` with the library's offline switch on for the call, so a name is read from
the user's cache (``$HF_HOME``/``$HF_DATASETS_CACHE``) or refused: normlab never downloads a
dataset. Rows are memory-mapped Arrow records read a batch at a time; each row of the text
column is one document (``normlab.data.stream`` joins them with newlines).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

from normlab.core.errors import UserError
from normlab.data.stream import HF_PREFIX, Source

ROWS = 256  # rows per Arrow batch read


def _datasets(spec: str) -> Any:
    try:
        import datasets
    except ImportError:
        raise UserError(f"SRC {HF_PREFIX}{spec}: reading a Hugging Face dataset needs the 'datasets' package: "
                        "pip install 'normlab[datasets]'") from None
    return datasets


@contextlib.contextmanager
def _offline(ds: Any) -> Iterator[None]:
    """The library's offline mode for one call (read at call time), restored afterwards."""
    import huggingface_hub.constants as hub

    old = ds.config.HF_HUB_OFFLINE, hub.HF_HUB_OFFLINE
    ds.config.HF_HUB_OFFLINE = hub.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        ds.config.HF_HUB_OFFLINE, hub.HF_HUB_OFFLINE = old


def _saved(p: Path) -> bool:
    return p.is_dir() and any((p / f).is_file() for f in ("dataset_info.json", "state.json", "dataset_dict.json"))


def _load(ds: Any, spec: str, config: str | None, split: str) -> Any:
    label = f"SRC {HF_PREFIX}{spec}"
    p = Path(spec).expanduser()
    try:
        if _saved(p):
            d = ds.load_from_disk(str(p))
            if isinstance(d, ds.DatasetDict):
                if split not in d:
                    raise UserError(f"{label}: no split {split!r}; choose --split from {', '.join(d)}")
                d = d[split]
            return d
        with _offline(ds):
            return ds.load_dataset(spec, config, split=split)
    except (FileNotFoundError, ConnectionError) as e:
        raise UserError(f"{label}: not on disk and not in the Hugging Face cache ({str(e).splitlines()[0][:200]}); "
                        "normlab never downloads: load it once with datasets.load_dataset outside normlab, "
                        "or give the folder Dataset.save_to_disk wrote") from None
    except ValueError as e:  # an unknown split or config
        raise UserError(f"{label}: {str(e).splitlines()[0][:300]}") from None


def dataset_source(spec: str, config: str | None, split: str, column: str) -> Source:
    """The Source of one split of a dataset; ``column`` holds the text."""
    ds = _datasets(spec)
    d = _load(ds, spec, config, split)
    if column not in d.column_names:
        raise UserError(f"SRC {HF_PREFIX}{spec}: no column {column!r}; choose --column from "
                        f"{', '.join(d.column_names)}")
    d = d.select_columns([column])
    kind = getattr(d.features[column], "dtype", "")
    if kind not in ("string", "large_string"):
        raise UserError(f"SRC {HF_PREFIX}{spec}: column {column!r} holds {kind or d.features[column]!r}, not text; "
                        "choose a text --column")

    def documents(records: list[dict[str, Any]]) -> Iterator[list[str]]:
        for batch in d.iter(batch_size=ROWS):
            for text in batch[column]:
                yield [text or ""]

    record = {"kind": "hf", "dataset": spec, "config": config, "split": split, "column": column,
              "rows": d.num_rows, "fingerprint": getattr(d, "_fingerprint", None)}
    return Source(f"{HF_PREFIX}{spec}", int(d.data.nbytes), documents, record)
