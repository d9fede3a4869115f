"""
Command line: `python -m cache_crop_fix status`, `... audit`, `... fingerprints`, `... drift` and `... new-target`.

`status` tells whether the fix is active in this process and whether the environment (`CACHE_CROP_FIX=1` and the
start-up hook) activates it in every Python process, the transformers and torch versions, and what is patched. It
exits with 1 when something is wrong: the installed transformers is not supported, the fix could not be applied, or
`CACHE_CROP_FIX` asks for the fix but the start-up hook is not installed or failed.

`audit` runs every cache layer type of the installed release through the same crops on stock transformers and with the
fix, and rewrites that target's section of `docs/source/en/cache_crop_audit.md` (`--stdout`, `--check`: see
`python -m cache_crop_fix audit --help`).

`drift [VERSION]` tells what a transformers release (default: the newest) changes for the nearest target, without
installing it; `new-target VERSION` adds a target for a release line, made from the nearest one (see their `--help`).
"""

import argparse
import importlib.metadata
import os
import site
import sys
import types

from . import _bootstrap, patcher
from .targets import get_target, supported_ranges


def _torch_version() -> str:
    torch = sys.modules.get("torch")
    if torch is not None:
        return torch.__version__
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _installed_pth() -> str | None:
    """The path of the start-up hook's `.pth` in one of the site directories that `site` reads, if any."""
    directories = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    if site.ENABLE_USER_SITE:
        directories.append(site.getusersitepackages())
    for directory in directories:
        path = os.path.join(directory, _bootstrap.PTH_NAME)
        if os.path.isfile(path):
            return path
    return None


def _environment() -> tuple[str, str, bool]:
    """Lines about activation through the environment and the start-up hook, and whether they are consistent."""
    variable, value = _bootstrap.ENV_VAR, os.environ.get(_bootstrap.ENV_VAR)
    pth = _installed_pth()
    loaded = sys.modules.get(_bootstrap.MODULE_NAME)  # the copy of `_bootstrap` that the `.pth` loaded at start-up
    failed = _bootstrap.MODULE_NAME in sys.modules and loaded is None  # the `.pth` leaves None when it fails
    hook = pth or f"not installed (no {_bootstrap.PTH_NAME} in site-packages)"
    if loaded is not None or failed:
        hook += f" (ran in this process: {'failed' if failed else loaded.state})"
    if not _bootstrap.requested():
        if value is not None and value.strip().lower() not in _bootstrap.FALSE_VALUES:
            return f"off ({variable}={value!r} is not understood; use {variable}=1)", hook, False
        shown = f"{variable} is not set" if value is None else f"{variable}={value!r}"
        return (
            f"off ({shown}): only programs that import cache_crop_fix get the fix; "
            f"{variable}=1 gives it to every Python process here",
            hook,
            True,
        )
    if failed:
        return f"broken ({variable}={value}): the start-up hook failed (its message is on stderr)", hook, False
    if loaded is None:
        reason = "python runs without `site`" if pth and sys.flags.no_site else "reinstall cache_crop_fix with pip"
        return f"broken ({variable}={value}): the start-up hook did not run; {reason}", hook, False
    if loaded.state.startswith("failed"):
        return f"broken ({variable}={value}): the start-up hook {loaded.state}", hook, False
    return (
        f"on ({variable}={value}): every Python process started with this environment gets the fix when it imports "
        "transformers.cache_utils, without importing cache_crop_fix",
        hook,
        True,
    )


def _describe(qualname: str) -> tuple[str, str]:
    """`transformers.cache_utils.DynamicLayer.crop` -> (`DynamicLayer.crop`, `transformers.cache_utils`)."""
    parts = qualname.split(".")
    for end in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:end])
        module = sys.modules.get(module_name)
        if module is None:
            continue
        name = ".".join(parts[end:])
        if "." not in name:  # a module-level name the fix adds: a helper function, or a module it imports
            name += " (import)" if isinstance(getattr(module, name, None), types.ModuleType) else " (helper)"
        return name, module_name
    return qualname, ""


def _status() -> int:
    from . import __version__

    reason = None
    if not patcher.is_active():
        try:
            patcher.apply()  # importing the package already tried; this gives the reason (and changes nothing)
        except patcher.UnsupportedTransformersError as error:
            reason = str(error)
    state = patcher.status()
    environment, hook, environment_ok = _environment()

    print(f"cache_crop_fix {__version__}")
    print(f"this process:  {'active' if state.active else 'inactive'}")
    print(f"environment:   {environment}")
    print(f"start-up hook: {hook}")
    if state.supported:
        target = get_target(state.target)
        support = f"supported; target {target.name}, the {target.label}"
    else:
        support = f"unsupported; cache_crop_fix needs {supported_ranges()}"
    print(f"transformers:  {state.transformers_version} ({support})")
    print(f"torch:         {_torch_version()}")
    if reason:
        print("reason:        " + reason.replace("\n", "\n               "))
    rows = [_describe(qualname) for qualname in state.patches]
    modules = {module for _, module in rows}
    print(f"patched:       {len(rows)} attributes in {len(modules)} modules" if rows else "patched:       nothing")
    width = max((len(name) for name, _ in rows), default=0)
    for name, module in rows:
        print(f"  {name:<{width}}  {module}")
    if state.pending_modules:
        print("pending:       patched when transformers imports them")
        for module in state.pending_modules:
            print(f"  {module}")
    return 0 if state.supported and state.active and environment_ok else 1


def _fingerprints() -> int:
    for qualname, fingerprint in sorted(patcher.installed_fingerprints().items()):
        print(f'    "{qualname}": frozenset({{"{fingerprint}"}}),')
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # The audit, drift and new-target have options of their own
    if argv[:1] == ["audit"]:
        from . import audit

        return audit.main(argv[1:])
    if argv[:1] == ["drift"]:
        from . import drift

        return drift.main(argv[1:])
    if argv[:1] == ["new-target"]:
        from . import new_target

        return new_target.main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m cache_crop_fix", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=["status", "fingerprints", "audit", "drift", "new-target"])
    args = parser.parse_args(argv)
    return _status() if args.command == "status" else _fingerprints()


if __name__ == "__main__":
    sys.exit(main())
