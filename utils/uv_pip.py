"""Runs `uv pip ...` with pip's package locations and constraint file: `python utils/uv_pip.py install -r FILE`.

uv reads neither pip's configuration files nor `PIP_*` variables. Where pip is configured with local wheels (a CPU
build of torch, say), extra indexes or a constraint file (a cap on torch), uv would otherwise download other builds
and ignore the cap. This hands them to uv through its own variables (`UV_FIND_LINKS`, `UV_EXTRA_INDEX_URL`,
`UV_CONSTRAINT`); variables already set win. Used by the Makefile (`make install`) and `noxfile.py`.
"""

import os
import subprocess
import sys


def pip_config(python: str = sys.executable) -> dict[str, str]:
    """pip's effective settings (configuration files and `PIP_*` variables), as `pip config list` prints them."""
    try:
        output = subprocess.run(
            [python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    settings = {}
    for line in output.splitlines():
        key, _, value = line.partition("=")
        name = key.rsplit(".", 1)[-1]
        # `:env:.find-links` (a variable) is listed before `global.find-links` (a file): pip lets the variable win
        if name and value:
            settings.setdefault(name, value.strip("'\""))
    return settings


def uv_environment(python: str = sys.executable) -> dict[str, str]:
    """uv's variables for pip's local package locations, extra indexes and constraint file."""
    pip = pip_config(python)
    env = {}
    find_links = [link for link in pip.get("find-links", "").split() if os.path.exists(link) or "://" in link]
    if find_links:
        env["UV_FIND_LINKS"] = ",".join(find_links)  # comma-separated, unlike PIP_FIND_LINKS
    extra_index_urls = pip.get("extra-index-url", "").split()
    if extra_index_urls:
        env["UV_EXTRA_INDEX_URL"] = " ".join(extra_index_urls)
        # A local index may hold some builds only (torch for Python 3.11, say): choose across all indexes, as pip
        # does, rather than uv's default of the first index that has the package
        env["UV_INDEX_STRATEGY"] = "unsafe-best-match"
    if pip.get("index-url"):
        env["UV_DEFAULT_INDEX"] = pip["index-url"]
    constraint = pip.get("constraint")
    if constraint and os.path.exists(constraint):
        env["UV_CONSTRAINT"] = constraint
    return {name: value for name, value in env.items() if name not in os.environ}


def main(argv: list[str]) -> int:
    uv = os.environ.get("UV", "uv")
    return subprocess.run([uv, "pip", *argv], env={**os.environ, **uv_environment()}).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
