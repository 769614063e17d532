"""Rows of plain values written as CSV with the standard library: the bytes pandas writes for
``DataFrame(rows, columns=columns).to_csv(index=False)``, so that ``normlab study export
--format csv`` needs no pandas and gives the file the DataFrames of ``load(STORE).frame()``
would (``tests/study/test_export_no_pandas.py`` compares the two).

The values are what the study's rows hold: None, bool, int, float (finite: ``frame._cell``
makes the rest missing) and str. pandas decides a column's type from its values and writes
each type its own way; the rule here is the part of that rule those values reach:

* a column whose values are all numbers (not bools) with a float or a missing value among them
  is float64: every number written as its float's shortest repr (``6`` -> ``6.0``);
* any other column is written value by value with ``str`` (ints, bools, text);
* a missing value is an empty field.
"""

from __future__ import annotations

import csv
import io
import os
from typing import Any, Sequence


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def column_texts(values: Sequence[Any]) -> list[str]:
    """The fields of one column, as pandas writes the column it would infer from ``values``."""
    present = [v for v in values if v is not None]
    as_float = (bool(present) and all(_is_number(v) for v in present)
                and (len(present) < len(values) or any(isinstance(v, float) for v in present)))
    if as_float:
        return ["" if v is None else repr(float(v)) for v in values]
    return ["" if v is None else str(v) for v in values]


def csv_bytes(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> bytes:
    """The CSV of ``rows`` (a key missing from a row is a missing value) under ``columns``."""
    cols = [column_texts([r.get(c) for r in rows]) for c in columns]
    buf = io.StringIO(newline="")
    # pandas' defaults: the excel dialect (minimal quoting) with the platform's line ending
    w = csv.writer(buf, lineterminator=os.linesep)
    w.writerow(columns)
    w.writerows(zip(*cols))
    return buf.getvalue().encode("utf-8")


__all__ = ["column_texts", "csv_bytes"]
