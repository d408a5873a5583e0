"""Parsers fed by the real tools, run here; and a clear error naming the tool and the line otherwise."""

from __future__ import annotations

import json
import subprocess

import pytest

from dlbench.workloads.micro import cpu, disk, network
from dlbench.workloads.micro.tools import ToolError, ToolOutputError, require_tool
from dlbench.workloads.profiles import get_profile
from tests.support.prereqs import require


def tool(name: str) -> None:
    try:
        require_tool(name)
    except ToolError as exc:
        require(False, str(exc))


def test_dd_parser_on_real_dd(tmp_path):
    tool("dd")
    proc = subprocess.run(["dd", "if=/dev/zero", f"of={tmp_path / 'f'}", "bs=64k", "count=16", "conv=fdatasync"],
                          capture_output=True, text=True, check=True)
    size, seconds = disk.parse_dd(proc.stderr)
    assert size == 16 * 65536 and seconds > 0


def test_ioping_parser_on_real_ioping(tmp_path):
    tool("ioping")
    proc = subprocess.run(["ioping", "-B", "-q", "-c", "3", str(tmp_path)], capture_output=True, text=True, check=True)
    stats = disk.parse_ioping_batch(proc.stdout)
    assert stats["count"] == 2  # ioping's first request is a warm-up
    assert 0 < stats["min_us"] <= stats["avg_us"] <= stats["max_us"]


def test_fio_parser_on_real_fio(tmp_path):
    tool("fio")
    proc = subprocess.run(["fio", "--name=t", f"--directory={tmp_path}", "--rw=randread", "--bs=4k", "--size=4m",
                           "--runtime=1", "--time_based", "--output-format=json"], capture_output=True, text=True,
                          check=True)
    stats = disk.parse_fio(proc.stdout)["t"]
    assert stats["iops"] > 0 and stats["bandwidth"] == pytest.approx(stats["iops"] * 4096 / 1e6, rel=0.05)


def test_iperf3_parser_on_real_iperf3():
    tool("iperf3")
    with network.servers("127.0.0.1", 5391) as (host, port):
        proc = subprocess.run(["iperf3", "-c", host, "-p", str(port), "-t", "1", "-J"], capture_output=True,
                              text=True, check=True)
        rtts = network.tcp_round_trips(host, port + 1, 20)
    stats = network.parse_iperf3(proc.stdout)
    assert stats["received_bps"] > 1e8 and len(rtts) == 20 and min(rtts) > 0


def test_hpcc_parser_on_real_hpcc(tmp_path):
    tool("hpcc")
    tool("mpirun")
    spec = get_profile("smoke").micro.cpu
    (tmp_path / "hpccinf.txt").write_text(cpu.hpl_input(500, spec.hpl_block, 1))
    env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "PATH": "/usr/bin:/bin"}
    subprocess.run(["mpirun", "-np", "1", "hpcc"], cwd=tmp_path, env=env, capture_output=True, check=True)
    values = cpu.parse_hpcc((tmp_path / "hpccoutf.txt").read_text())
    assert values["HPL_N"] == 500 and values["HPL_Tflops"] > 0


def test_hpcg_converges_and_counts_flops():
    result = cpu.parse_hpcg(subprocess.run([str(cpu.hpcg_binary()), "16", "0.5"], capture_output=True, text=True,
                                           check=True).stdout)
    assert result["max_error"] < 1e-9 and result["gflops"] > 0 and result["sets"] >= 1


@pytest.mark.parametrize(("parse", "text", "tool_name"), [
    (disk.parse_dd, "dd: error writing 'x': No space left on device\n10+0 records copied, fast", "dd"),
    (disk.parse_ioping_batch, "ioping: request timeout\n", "ioping"),
    (disk.parse_fio, "fio: pid=1, err=5/file:io_u.c:1 {broken", "fio"),
    (network.parse_iperf3, "iperf3: error - unable to connect to server", "iperf3"),
    (cpu.parse_hpcc, "HPL ERROR from process # 0", "hpcc"),
    (cpu.parse_hpcg, "Segmentation fault", "dlbench-hpcg"),
])
def test_unexpected_output_names_the_tool_and_the_line(parse, text, tool_name):
    with pytest.raises(ToolOutputError) as info:
        parse(text)
    assert info.value.tool == tool_name
    assert tool_name in str(info.value)


def test_iperf3_error_json_is_reported():
    with pytest.raises(ToolError, match="unable to connect"):
        network.parse_iperf3(json.dumps({"error": "unable to connect to server: Connection refused"}))
