"""Summaries of pyinstrument sessions: where the time of a profiled child went.

A profiled child (``run_child(..., profile_to=path)``) saves a ``.pyisession``;
:func:`summarize` reads it and returns the top frames by *self* time and the share
of time per package (httpcore, anyio, pydantic, dlt, our code, waiting in the
event loop's ``select``...). Open a session yourself with
``.venv/bin/pyinstrument --load benchmarks/.work/<name>.pyisession``.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

_SITE = re.compile(r"site-packages/([^/]+)")
_STDLIB = re.compile(r"/lib/python3\.\d+/([^/]+)")

#: Packages grouped by the job they do in a sync.
GROUPS = {
    "HTTP stack (httpx, httpcore, h11, anyio)": {"httpx", "httpcore", "h11", "anyio", "sniffio",
                                                 "stdlib:ssl", "certifi", "idna"},
    "asyncio event loop": {"stdlib:asyncio", "stdlib:selectors", "stdlib:contextvars"},
    "our code (pipelines/, diligence/)": {"pipelines", "diligence"},
    "pydantic validation": {"pydantic", "pydantic_core"},
    "retries and rate limiter (tenacity, aiolimiter)": {"tenacity", "aiolimiter"},
    "dlt (extract, normalize, load)": {"dlt", "sqlglot", "simplejson", "jsonpath_ng", "ply",
                                       "hexbytes", "orjson", "requests", "urllib3"},
    "pyarrow / duckdb": {"pyarrow", "duckdb"},
    "benchmark harness": {"benchmarks"},
}
WAITING = "waiting for the network (epoll)"
IMPORTS = "imports (module loading)"
_WAIT_FUNCTIONS = {"epoll.poll", "poll", "select", "kqueue.control", "devpoll.poll"}


def _package(file_path: str | None) -> str:
    path = file_path or ""
    if match := _SITE.search(path):
        name = match.group(1)
        return name.removesuffix(".py")
    for ours in ("pipelines", "diligence", "benchmarks"):
        if f"/{ours}/" in path:
            return ours
    if match := _STDLIB.search(path):
        name = match.group(1)
        return "stdlib:" + (name.removesuffix(".py"))
    if path.startswith("<"):
        return path  # <built-in>, <frozen ...>, <string>
    return "other"


def _group(package: str) -> str:
    for group, members in GROUPS.items():
        if package in members:
            return group
    if package.startswith("stdlib:"):
        return "other stdlib"
    return package


#: Inclusive shares reported for these frames: (label, function, file path suffix).
INCLUSIVE = [
    ("fetch phase (our `run_coroutine` / the ceiling's `run`)", "run_coroutine",
     "pipelines/company_connections/stream.py"),
    ("fetch phase (our `run_coroutine` / the ceiling's `run`)", "run", "benchmarks/ceiling.py"),
    ("inside httpx `AsyncClient.request` (whole HTTP round trip)", "request", "httpx/_client.py"),
    ("dlt `pipeline.run` (extract, normalize, load)", "run", "dlt/pipeline/pipeline.py"),
]


def _inclusive(root: Any, total: float) -> dict[str, float]:
    """Share of samples under the topmost frame matching each of :data:`INCLUSIVE`."""
    shares: dict[str, float] = {}
    for label, function, suffix in INCLUSIVE:
        found = 0.0
        stack = [root]
        while stack:
            frame = stack.pop()
            if frame.function == function and (frame.file_path or "").endswith(suffix):
                found += frame.time
                continue
            stack.extend(frame.children)
        if found:
            shares[label] = shares.get(label, 0.0) + found / total
    return shares


def _label(frame: Any) -> str:
    return f"{frame.function}  {frame.file_path_short or ''}:{frame.line_no}"


def summarize(session_path: Path, top: int = 12) -> dict[str, Any]:
    """Self time by group of packages, and the top frames by self time, as shares.

    Built-in (C) functions count for the group of the Python code that called them,
    except the event loop's ``epoll.poll`` (waiting for the network) and pydantic's
    validator; everything under an import counts as imports.
    """
    from pyinstrument.session import Session

    session = Session.load(str(session_path))
    root = session.root_frame()
    if root is None:
        return {"duration": 0.0, "frames": [], "groups": []}
    total = root.time or 1e-9
    by_frame: Counter[str] = Counter()
    by_group: Counter[str] = Counter()
    ours: Counter[str] = Counter()
    stack: list[tuple[Any, str, bool]] = [(root, "other", False)]
    while stack:
        frame, caller_group, in_import = stack.pop()
        path = frame.file_path or ""
        function = frame.function or ""
        importing = in_import or "importlib._bootstrap" in path or function == "__import__"
        package = _package(path)
        if importing:
            group = IMPORTS
        elif function in _WAIT_FUNCTIONS and path.startswith("<built-in>"):
            group = WAITING
        elif function.startswith(("SchemaValidator.", "TypeAdapter")):
            group = "pydantic validation"
        elif frame.is_synthetic or path.startswith("<"):
            group = caller_group
        else:
            group = _group(package)
        stack.extend((child, group, importing) for child in frame.children)
        self_time = frame.time - sum(child.time for child in frame.children)
        if self_time <= 0:
            continue
        if frame.is_synthetic and frame.parent is not None:
            label = f"{frame.function} in {_label(frame.parent)}"
        else:
            label = _label(frame)
        by_frame[label] += self_time
        by_group[group] += self_time
        if group == "our code (pipelines/, diligence/)":
            ours[label] += self_time
    return {
        "duration": session.duration,
        "cpu_time": getattr(session, "cpu_time", None),
        "frames": [[label, t / total] for label, t in by_frame.most_common(top)],
        "groups": [[name, t / total] for name, t in by_group.most_common()],
        "ours": [[label, t / total] for label, t in ours.most_common(6)],
        "inclusive": _inclusive(root, total),
    }


def render(summary: dict[str, Any], title: str) -> str:
    """Markdown: the top self-time frames and the per-package shares."""
    lines = [f"**{title}** (profiled run: {summary['duration']:.1f} s wall"
             + (f", {summary['cpu_time']:.1f} s CPU" if summary.get("cpu_time") else "") + ")", ""]
    if summary.get("inclusive"):
        lines += ["| share of samples | inclusive time |", "|---:|---|"]
        lines += [f"| {share:.0%} | {name} |" for name, share in summary["inclusive"].items()]
        lines += [""]
    lines += ["| share of samples | where the time goes (self time by group) |", "|---:|---|"]
    lines += [f"| {share:.0%} | {name} |" for name, share in summary["groups"] if share >= 0.01]
    lines += ["", "| share | top frames by self time |", "|---:|---|"]
    lines += [f"| {share:.1%} | `{label}` |" for label, share in summary["frames"][:10]]
    if summary.get("ours"):
        lines += ["", "| share | our code's top frames by self time |", "|---:|---|"]
        lines += [f"| {share:.1%} | `{label}` |" for label, share in summary["ours"]]
    return "\n".join(lines)
