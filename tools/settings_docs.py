"""docs/settings.md, rendered from the declarations in ``dlbench.settings`` (every setting, its
sources, type, default and the accessor that reads it). A tool, not the product: the product reads
settings, this writes their page (tests/pipeline/test_settings.py fails when the page differs).

    python -m tools.settings_docs docs/settings.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dlbench.settings import SETTINGS


def accessor_path(accessor: str) -> str:
    """The accessor's full name: ``warehouse_url()`` is ``dlbench.settings``'s, a dotted one
    (``hooks.warehouse.warehouse_location()``) is under ``dlbench``."""
    return f"dlbench.{accessor}" if "." in accessor.split("(")[0] else f"dlbench.settings.{accessor}"


def _anchor(title: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return "".join(c for c in title.lower().replace(" ", "-") if c.isalnum() or c in "-_")


def render_markdown() -> str:
    """docs/settings.md: every setting, from the declarations above."""
    out = [
        "# Settings",
        "",
        "<!-- Generated from include/dlbench/settings.py by `python -m tools.settings_docs docs/settings.md`: edit "
        "the declarations there, not this file (tests/pipeline/test_settings.py fails when they differ). -->",
        "",
        "Every environment variable, Airflow Variable, Airflow connection and Airflow configuration option "
        "dlbench reads, with its type, default and precedence. `dlbench.settings` declares each one and is "
        "the only module that reads them; the rest of the product calls the accessor named below.",
        "",
        "- **Precedence**: where a setting has several sources, the first one that is set wins, else the "
        "default.",
        "- **Environment variables** count in the process that reads them: the Airflow worker running the "
        "task, the API server (the UI plugin), the scheduler or DAG processor (parse time), or your shell (the "
        "CLI, `make run`). With several workers, set them on every worker.",
        "- **Airflow Variables** read through Airflow may also be given as `AIRFLOW_VAR_<NAME>` environment "
        "variables or by a secrets backend (Airflow's own rule).",
        "- **Workloads** (on the benchmarked machine) read none of these: what they need, their executor hands "
        "them (see `DLBENCH_TRACE_SYSCALLS`). They do read facts of their own machine "
        "(`CUDA_VISIBLE_DEVICES`, `KUBERNETES_SERVICE_HOST`, `XDG_CACHE_HOME`), which are not settings.",
        "",
        "| setting | read from (first set wins) | default |",
        "|---|---|---|",
    ]
    for setting in SETTINGS:
        sources = "; ".join(f"{s.kind} `{s.key}`" for s in setting.sources)
        out.append(f"| [`{setting.name}`](#{_anchor(setting.name)}) | {sources} | {setting.default_doc} |")
    for setting in SETTINGS:
        accessors = ", ".join(f"`{accessor_path(a)}`" for a in setting.accessors)
        out += ["", f"## `{setting.name}`", "", setting.doc, "",
                f"- **Read from**: {'; then '.join(str(s) for s in setting.sources)}",
                f"- **Type**: {setting.type}",
                f"- **Default**: {setting.default_doc}",
                f"- **Read by**: {setting.read_by}",
                f"- **Read with**: {accessors}"]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m tools.settings_docs [OUT]``: render docs/settings.md to stdout (or to OUT)."""
    parser = argparse.ArgumentParser(prog="python -m tools.settings_docs", description=main.__doc__)
    parser.add_argument("out", nargs="?", type=Path, help="write here instead of stdout (e.g. docs/settings.md)")
    args = parser.parse_args(argv)
    text = render_markdown()
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
