"""The comparison as data files: comparison.csv and comparison.json, the same rows and fields."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from dlbench.reports.analysis import compare


def write_comparison(stats: pd.DataFrame, out: Path) -> None:
    """comparison.csv and comparison.json: the same rows and the same fields (NaN: empty / null)."""
    table = stats[[c for c in compare.COLUMNS if c in stats.columns]] if not stats.empty else \
        pd.DataFrame(columns=compare.COLUMNS)
    table.to_csv(out / "comparison.csv", index=False)
    records = [{k: (None if isinstance(v, float) and math.isnan(v) else v.item() if hasattr(v, "item") else v)
                for k, v in row.items()} for row in table.to_dict(orient="records")]
    (out / "comparison.json").write_text(json.dumps({"fields": list(table.columns), "rows": records}, indent=1,
                                                    default=str))
