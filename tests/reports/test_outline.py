"""The report's outline: the HTML navigation, the HTML body and the text summary follow one ordered
list of sections (issue 40), on a real warehouse."""

from __future__ import annotations

import re

from dlbench.reports import build_report, text_table
from dlbench.reports.outline import SECTIONS
from dlbench.reports.sections.base import RunView
from dlbench.warehouse.load import load_documents
from dlbench.workloads.result import Status
from tests.reports.test_reports import disk_doc, tf_doc


def _run(engine) -> None:
    docs = [tf_doc(p, r, t + r, e + r) for p, t, e in (("bare_metal", 100.0, 10.0), ("container_on_bare_metal", 90.0,
                                                                                       12.0)) for r in (0, 1, 2)]
    docs += [disk_doc(p, r, b + r, lat + r) for p, b, lat in (("bare_metal", 200.0, 50.0),
                                                              ("container_on_bare_metal", 150.0, 80.0))
             for r in (0, 1, 2)]
    docs.append(tf_doc("virtual_machine", 0, 0, 0, status=Status.FAILED, error="RuntimeError: out of memory"))
    load_documents(engine, docs)


def test_sections_are_named_once_and_each_renders_both_ways():
    ids = [section.id for section in SECTIONS]
    assert len(ids) == len(set(ids)), ids
    assert ids[0] == "answer" and ids[-1] == "problems"  # the answer first, failures last


def test_navigation_body_and_text_follow_the_outline(engine, tmp_path):
    _run(engine)
    page = build_report(engine, "r1", tmp_path / "r").read_text()
    run = RunView(engine, "r1", tmp_path / "again")
    (tmp_path / "again").mkdir()
    rendered = [(section, section.html(run)) for section in SECTIONS]
    shown = [section for section, body in rendered if body]
    # This run has an answer, micro-benchmarks, an environment and a failure; no gates, no prices.
    assert {"answer", "micro", "environment", "problems"} <= {s.id for s in shown}
    assert "gates" not in {s.id for s in shown} and "cost" not in {s.id for s in shown}
    # The navigation: exactly the shown sections that have a title, in the outline's order, each
    # pointing at an anchor the body has.
    nav = re.search(r"<nav>(.*?)</nav>", page).group(1)
    anchors = re.findall(r"href='#([^']+)'", nav)
    assert anchors == [s.id for s in shown if s.title]
    for anchor in anchors:
        assert f"id='{anchor}'" in page.split("</nav>", 1)[1], anchor
    # The body: each shown section's HTML, in the outline's order.
    positions = [page.index(body[:200]) for _, body in rendered if body]
    assert positions == sorted(positions)
    # The text: every section's lines, in the same order (a section with nothing to say adds none).
    table = text_table(engine, "r1", tmp_path / "r").splitlines()
    text_run = RunView(engine, "r1")
    said = [(section, lines) for section in SECTIONS if (lines := section.text(text_run))]
    assert [s.id for s, _ in said][:1] == ["answer"] and said[-1][0].id == "problems"
    starts = [table.index(next(line for line in lines if line)) for _, lines in said]
    assert starts == sorted(starts), [s.id for s, _ in said]
    # The grade closes the answer, before the micro-benchmarks; the failure is the last section.
    grade = next(i for i, line in enumerate(table) if "DECISION-GRADE" in line)
    micro = table.index("Micro-benchmarks (headline metrics vs bare metal):")
    assert starts[0] < grade < micro
    assert table.index(next(line for line in table if line.startswith("FAILED: tf_cnn/"))) > micro
