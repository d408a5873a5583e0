"""Network: iperf3 TCP throughput and a TCP round-trip latency between two endpoints.

``serve`` starts an iperf3 server and a small TCP echo server (the latency endpoint, port + 1)
and runs until stopped, for the DAG to start on one instance and point the others at. Without
``--server`` the benchmark starts both on loopback itself, which measures the host's own stack.
"""

from __future__ import annotations

import json
import socket
import socketserver
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dlbench.workloads.micro.tools import ToolError, ToolOutputError, require_tool, run_tool, tool_version
from dlbench.workloads.profiles import NetworkSpec
from dlbench.workloads.result import ResultDocument

DEFAULT_PORT = 5201


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while data := self.request.recv(64):
            self.request.sendall(data)


class _EchoServer(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


@contextmanager
def servers(bind: str = "127.0.0.1", port: int = DEFAULT_PORT) -> Iterator[tuple[str, int]]:
    """iperf3 server on ``port`` and the echo server on ``port + 1``, stopped on exit.

    Readiness comes from iperf3's own "Server listening" line, not from a probe connection: a
    connection that closes without iperf3's handshake makes the server reset the next client
    ("unable to receive control message: Connection reset by peer").
    """
    require_tool("iperf3")
    with tempfile.NamedTemporaryFile("w+", prefix="dlbench-iperf3-", suffix=".log") as log:
        iperf = subprocess.Popen(["iperf3", "-s", "-B", bind, "-p", str(port), "--forceflush"], stdout=log,
                                 stderr=subprocess.STDOUT, text=True)
        echo = _EchoServer((bind, port + 1), _Echo)
        thread = threading.Thread(target=echo.serve_forever, daemon=True)
        thread.start()
        try:
            _wait_until_listening(Path(log.name), iperf)
            yield bind, port
        finally:
            echo.shutdown()
            echo.server_close()
            iperf.terminate()
            try:
                iperf.wait(timeout=10)
            except subprocess.TimeoutExpired:
                iperf.kill()
                iperf.wait()


def _wait_until_listening(log: Path, process: subprocess.Popen, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if "Server listening" in text:
            return
        if process.poll() is not None:
            raise ToolError(f"iperf3 server exited with status {process.returncode}: {text.strip()[-300:]}")
        time.sleep(0.05)
    raise ToolError(f"iperf3 server did not report 'Server listening' within {timeout:.0f} s")


def parse_iperf3(stdout: str) -> dict[str, float]:
    try:
        data = json.loads(stdout)
    except json.JSONDecodeError as exc:
        line = stdout.strip().splitlines()[0] if stdout.strip() else ""
        raise ToolOutputError("iperf3", line, f"JSON from -J ({exc.msg})") from None
    if "error" in data:
        raise ToolError(f"iperf3: {data['error']}")
    try:
        end = data["end"]
        return {"sent_bps": end["sum_sent"]["bits_per_second"], "received_bps": end["sum_received"]["bits_per_second"],
                "retransmits": float(end["sum_sent"].get("retransmits", 0))}
    except KeyError as exc:
        raise ToolOutputError("iperf3", json.dumps(data)[:200], f"end.sum_sent/sum_received ({exc})") from None


def tcp_round_trips(host: str, port: int, samples: int, timeout: float = 5) -> list[float]:
    """Round-trip times in microseconds of 1-byte messages on one TCP connection (Nagle off)."""
    times = []
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(samples):
            start = time.perf_counter()
            sock.sendall(b"x")
            if sock.recv(1) != b"x":
                raise ToolError("latency echo server answered wrongly")
            times.append((time.perf_counter() - start) * 1e6)
    return times


def measure(doc: ResultDocument, spec: NetworkSpec, host: str, port: int) -> None:
    proc = run_tool(["iperf3", "-c", host, "-p", str(port), "-t", str(spec.seconds), "-J"], timeout=spec.seconds + 60,
                    ok_codes=(0, 1))
    stats = parse_iperf3(proc.stdout)
    doc.add("tcp_throughput", stats["received_bps"] / 1e9, "Gbit/s", direction="client_to_server", tool="iperf3")
    doc.add("tcp_retransmits", stats["retransmits"], "count", tool="iperf3")
    rtts = sorted(tcp_round_trips(host, port + 1, spec.latency_samples))
    doc.add("tcp_latency", statistics.median(rtts), "us", statistic="p50", tool="echo")
    doc.add("tcp_latency", rtts[min(len(rtts) - 1, int(0.99 * len(rtts)))], "us", statistic="p99", tool="echo")
    doc.add("tcp_latency", statistics.fmean(rtts), "us", statistic="mean", tool="echo")


def run(doc: ResultDocument, spec: NetworkSpec, server: str | None, port: int = DEFAULT_PORT) -> None:
    doc.environment.versions["iperf3"] = tool_version(["iperf3", "--version"])
    if server:
        doc.labels["network_peer"] = server
        measure(doc, spec, server, port)
        return
    doc.labels["network_peer"] = "loopback"
    with servers("127.0.0.1", port) as (host, bound):
        measure(doc, spec, host, bound)


def serve(bind: str, port: int, seconds: float | None = None) -> None:
    """Run the endpoints until interrupted (or for ``seconds``)."""
    with servers(bind, port):
        print(f"serving iperf3 on {bind}:{port} and latency echo on {bind}:{port + 1}", flush=True)
        deadline = time.monotonic() + seconds if seconds else None
        try:
            while deadline is None or time.monotonic() < deadline:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
