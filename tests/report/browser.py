"""Drive Debian's headless Chromium on a local file: the DOM after scripts ran, a screenshot.

No driver and no browser download: `chromium --headless --dump-dom` with a virtual time
budget runs the page's scripts to quiescence and prints the resulting DOM. `make browser`
installs the package when /usr/bin/chromium is missing.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
]


def chromium() -> str:
    """Path of the Chromium binary, or an AssertionError saying how to install it."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "Chromium is not installed: run `make browser` (apt-get install chromium)"
    return found


def _run(page: Path, extra: list[str], timeout: float) -> tuple[str, float]:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        started = time.perf_counter()
        result = subprocess.run(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", *extra, page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        seconds = time.perf_counter() - started
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout, seconds


def dump_dom(page: Path, *, budget_ms: int = 30_000, timeout: float = 120,
             width: int = 1280, height: int = 2000) -> tuple[str, float]:
    """(the DOM after the page's scripts settled in a window `width` pixels wide, wall
    seconds of the whole browser run)."""
    return _run(page, [f"--virtual-time-budget={budget_ms}", f"--window-size={width},{height}", "--dump-dom"],
                timeout)


def screenshot(
    page: Path, png: Path, *, width: int = 1280, height: int = 2000, timeout: float = 120
) -> Path:
    """A PNG of the page's first `height` pixels after its scripts settled."""
    png.parent.mkdir(parents=True, exist_ok=True)
    _run(
        page,
        [
            "--virtual-time-budget=30000",
            f"--window-size={width},{height}",
            f"--screenshot={png.resolve()}",
        ],
        timeout,
    )
    assert png.exists() and png.stat().st_size > 10_000, "Chromium wrote no screenshot"
    return png
