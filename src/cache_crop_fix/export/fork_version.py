"""The fork branch says what it is: one commit on top of the stack, on `fix-cache-crop` only (never in a pull request's
commits), gives transformers a PEP 440 local version, `5.14.1+cachecropfix.g<short sha of the stack>`, in `setup.py`
and `__version__` alike (the `g`, as in `git describe`, keeps an all-digit sha from being normalized: PEP 440 reads
`0123` as the number 123). `pip freeze`, `transformers env` and bug reports then tell the fork from the release, while
`==5.14.1` pins and transformers' own version checks still accept it (a local version matches its public version).
"""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

from .shell import ExportError


LOCAL_LABEL = "cachecropfix"
TITLE = "Version the fork branch"
INIT_PATH = "src/transformers/__init__.py"
SETUP_PATH = "setup.py"
_INIT_VERSION = re.compile(r'^(__version__\s*=\s*")([^"]+)(")', re.MULTILINE)
_SETUP_VERSION = re.compile(r'^(\s*version\s*=\s*")([^"]+)(")', re.MULTILINE)


def local_version(version: str, stack_commit: str) -> str:
    """`5.14.1`, `0123456789abcdef...` -> `5.14.1+cachecropfix.g0123456789` (a local version already there is
    replaced)."""
    if not isinstance(version, str) or not isinstance(stack_commit, str):
        raise TypeError(
            f"local_version needs two strings (a version and a commit), not {type(version).__name__} and "
            f"{type(stack_commit).__name__}"
        )
    if not re.fullmatch(r"[0-9a-f]{10,40}", stack_commit):
        raise ValueError(f"{stack_commit!r} is not a git commit id")
    try:
        public = Version(version).public
    except InvalidVersion:
        raise ValueError(f"{version!r} is not a PEP 440 version") from None
    return f"{public}+{LOCAL_LABEL}.g{stack_commit[:10]}"


def versioned_sources(init: str | None, setup_py: str | None, stack_commit: str) -> tuple[str, dict[str, str]]:
    """The local version and the new contents of `src/transformers/__init__.py` and `setup.py` (where it sets the
    version: a checkout's `setup.py` may not)."""
    found = _INIT_VERSION.search(init or "")
    if found is None:
        raise ExportError(f'{INIT_PATH} sets no `__version__ = "..."`: cannot version the fork branch')
    version = local_version(found.group(2), stack_commit)
    sources = {INIT_PATH: _INIT_VERSION.sub(rf"\g<1>{version}\g<3>", init, count=1)}
    if setup_py is not None and _SETUP_VERSION.search(setup_py):
        sources[SETUP_PATH] = _SETUP_VERSION.sub(rf"\g<1>{version}\g<3>", setup_py, count=1)
    return version, sources


def message(version: str, stack_commit: str) -> str:
    return (
        f"{TITLE}\n\n"
        f"transformers {version}: the release with the `fix-cache-crop` stack up to {stack_commit[:10]}. This commit "
        "is only on the fork branch (`fix-cache-crop`), never in a pull request.\n"
    )
