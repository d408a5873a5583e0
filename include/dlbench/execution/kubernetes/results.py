"""How the result document leaves the pod without a shared filesystem: on the container's log.

The pod runs ``sh -c`` :data:`WRAPPER` around the workload; after it exits, :data:`EMIT` prints
the document gzip-compressed and base64-encoded between markers carrying its SHA-256 and sizes.
:func:`decode_result` takes the last complete block of the log back and verifies it.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import re

from dlbench.workloads.result import ResultDocument

BEGIN, END = "=====DLBENCH-RESULT-BEGIN", "=====DLBENCH-RESULT-END"
NONE = "=====DLBENCH-RESULT-NONE====="
"""Printed instead of a block when the workload wrote no document."""
RESULT_PATH = "/tmp/dlbench-result/result.json"
CHUNK = 4096
"""Characters of base64 per log line (short lines: no runtime splits them)."""

EMIT = (
    "import base64,gzip,hashlib,sys\n"
    "p=sys.argv[1]\n"
    "try:\n data=open(p,'rb').read()\n"
    f"except OSError:\n print('{NONE}',flush=True);sys.exit(0)\n"
    "enc=base64.b64encode(gzip.compress(data,6)).decode()\n"
    "h=hashlib.sha256(data).hexdigest()\n"
    "w=sys.stdout.write\n"
    f"w('\\n{BEGIN} sha256=%s bytes=%d encoded=%d=====\\n'%(h,len(data),len(enc)))\n"
    f"[w(enc[i:i+{CHUNK}]+'\\n') for i in range(0,len(enc),{CHUNK})]\n"
    f"w('{END} sha256=%s=====\\n'%h);sys.stdout.flush()\n"
)
"""Run by the pod's python after the workload: the document between markers on stdout."""

WRAPPER = (
    'mkdir -p "$(dirname "$DLBENCH_RESULT")"; '
    'python -m dlbench.workloads "$@" & pid=$!; '
    "trap 'kill -TERM $pid 2>/dev/null' TERM INT; "
    "wait $pid; rc=$?; "
    "if kill -0 $pid 2>/dev/null; then wait $pid; rc=$?; fi; "
    'python -c "$DLBENCH_EMIT" "$DLBENCH_RESULT"; exit $rc'
)
"""The pod's command (``sh -c WRAPPER sh ARGS``): the workload as a child that gets the TERM a
deadline or a stop sends to PID 1, then :data:`EMIT`."""


def decode_result(text: str) -> tuple[ResultDocument | None, str]:
    """The last complete, verified document between the markers of a pod's log."""
    start = text.rfind(BEGIN)
    if start < 0:
        if NONE in text:
            return None, "the workload wrote no result document"
        return None, "no result document on the pod's log (the container ended before printing it)"
    head, _, rest = text[start:].partition("\n")
    fields = dict(re.findall(r"(\w+)=([0-9a-f]+)", head))
    body, found, _ = rest.partition(END)
    if not found:
        return None, "the result document on the pod's log is incomplete (no end marker: log rotated or cut)"
    encoded = "".join(body.split())
    if str(len(encoded)) != fields.get("encoded"):
        return None, f"the result document on the pod's log is cut: {len(encoded)} of {fields.get('encoded')} chars"
    try:
        data = gzip.decompress(base64.b64decode(encoded))
    except (ValueError, OSError) as exc:
        return None, f"the result document on the pod's log does not decode: {exc}"
    if hashlib.sha256(data).hexdigest() != fields.get("sha256") or str(len(data)) != fields.get("bytes"):
        return None, "the result document on the pod's log fails its checksum"
    try:
        return ResultDocument.model_validate_json(data), ""
    except ValueError as exc:
        return None, f"unreadable result document from the pod's log: {exc}"
