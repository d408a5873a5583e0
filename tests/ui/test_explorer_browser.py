"""The explorer in a real headless browser (Debian's chromium over the DevTools protocol), served by
uvicorn under a prefix, on a warehouse with generated multi-run history: the page loads, changing
a filter changes the charts, and the console stays free of errors."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import uvicorn
from fastapi import FastAPI

from dlbench.ui.app import create_app
from tests.conftest import require
from tests.ui.cdp import Browser, chromium_binary
from tools.ui_history import Step, generate_history

PREFIX = "/plugins/dlbench"


@pytest.fixture
def served(tmp_path):
    from dlbench.warehouse import db

    engine = db.upgrade(db.engine_for(f"sqlite:///{tmp_path / 'warehouse.db'}"))
    runs = generate_history(engine, runs=12, step=Step("container_on_vm", 9, 0.8), seed=11)
    root = FastAPI()
    root.mount(PREFIX, create_app(engine))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(root, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    yield f"http://127.0.0.1:{port}{PREFIX}/", runs
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def browser():
    binary = chromium_binary()
    if binary is None:
        print("\nskipping the browser test: no chromium binary (Debian: apt-get install chromium; make prereqs)")
    require(binary is not None, "chromium is not installed (Debian: apt-get install chromium; make prereqs)")
    instance = Browser(binary)
    yield instance
    instance.close()


def chart(browser: Browser, box: str) -> str:
    return browser.evaluate(f"document.querySelector('#{box} svg') ? document.querySelector('#{box} svg')"
                            f".outerHTML : ''")


def updates(browser: Browser) -> int:
    return int(browser.evaluate("document.body.dataset.updates") or 0)


def change(browser: Browser, expression: str) -> None:
    """Run ``expression`` (it changes a filter and fires its change event); wait for the refresh."""
    before = updates(browser)
    browser.evaluate(expression)
    browser.wait_for(f"Number(document.body.dataset.updates) > {before}")


def test_explorer_page_in_headless_chromium(served, browser):
    url, runs = served
    browser.call("Page.navigate", url=url)
    browser.wait_for("Number(document.body.dataset.updates) >= 1")
    assert browser.evaluate("document.title") == "dlbench results explorer"
    assert browser.evaluate("document.getElementById('status').textContent").startswith("runs: ")
    assert browser.evaluate("document.querySelectorAll('#runs option').length") == len(runs)
    assert browser.evaluate("document.querySelectorAll('#platforms input').length") == 4
    first = {box: chart(browser, box) for box in ("comparison-chart-box", "trend-chart-box", "capacity-chart-box")}
    assert all(svg.startswith("<svg") for svg in first.values()), first
    # The generated step on container_on_vm is a change point on the trend.
    assert browser.evaluate("document.querySelectorAll('#trend-chart .change-point').length") >= 1
    # The DAG run links resolve under the prefix's parent (the Airflow UI's /dags/...).
    href = browser.evaluate("document.querySelector('#trend-links a.dagrun').href")
    assert href.startswith(url.rsplit("/dlbench/", 1)[0] + "/dags/dlbench_benchmark/runs/")

    change(browser, "const m = document.getElementById('model'); m.value = 'resnet50';"
                    "m.dispatchEvent(new Event('change'))")
    second = {box: chart(browser, box) for box in first}
    assert second["comparison-chart-box"] != first["comparison-chart-box"]
    assert second["trend-chart-box"] != first["trend-chart-box"]
    text = browser.evaluate("document.getElementById('comparison').textContent")
    assert "resnet50" in text and "alexnet" not in text

    change(browser, "const c = document.querySelector('#platforms input[value=virtual_machine]');"
                    "c.checked = false; c.dispatchEvent(new Event('change'))")
    assert browser.evaluate("document.querySelectorAll('#trend-chart polyline.series').length") == 3
    assert "virtual_machine" not in browser.evaluate("document.getElementById('comparison').textContent")

    change(browser, "const r = document.getElementById('runs'); r.options[3].selected = true;"
                    "r.options[4].selected = true; r.dispatchEvent(new Event('change'))")
    assert browser.evaluate("document.getElementById('status').textContent") == (
        f"runs: {runs[-4]}, {runs[-5]}")

    # Pin a baseline from the page.
    browser.evaluate("document.getElementById('pin-run').value = " + repr(runs[1]))
    browser.evaluate("document.getElementById('pin-button').click()")
    browser.wait_for(f"document.getElementById('pins').textContent.includes('{runs[1]}')")
    assert browser.errors() == []
