"""The upstream series alone never makes a case worse than `main`: `make never-worse`.

Runs the project's generation sweeps (every family, every drafter, dynamic and static caches, the calls users make)
twice in the 5.25 environment: on stock transformers (`pytest --stock`) and with the upstream series alone
(`CACHE_CROP_FIX_SERIES=upstream`: the pull requests without the fork steps). Each case of the series run must

- pass (it equals greedy and every cache state checked is right), or
- fail as on stock 5.25.0 (the same exception type: the series leaves that case as `main` has it), or
- raise a clear error (`ValueError`, `TypeError`, `NotImplementedError`) where stock fails too.

Anything else is worse than `main`: a case that passes on stock and fails with the series, or an error on stock turned
into a failed assertion (silent wrong tokens or a wrong state) by the series. Prints one line per class of outcome and
every worse case; exits 1 if there is one.

    .venv-v5_25/bin/python utils/never_worse.py [pytest selection ...]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
SWEEPS = (
    "tests/test_generation.py",
    "tests/test_generation_hybrid.py",
    "tests/test_generation_drafter_caches.py",
    "tests/test_generation_main_hybrid.py",
    "tests/test_generation_main_hybrid_mtp.py",
    "tests/test_generation_user_patterns.py",
    "tests/test_call_sites.py",
)
CLEAR_ERRORS = ("ValueError", "TypeError", "NotImplementedError")
ERROR_TYPE = re.compile(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception|Exit))\b")


def outcomes(report: Path) -> dict[str, str]:
    """`Class.test[id]` (numbered when subtests repeat it) -> `passed`, `skipped`, or the exception type that failed it
    (`AssertionError` for a failed assertion)."""
    found: dict[str, str] = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}.{case.get('name')}"
        outcome = "passed"
        for child in case:
            if child.tag == "skipped":
                outcome = "skipped"
            elif child.tag in ("failure", "error"):
                match = ERROR_TYPE.match(child.get("message") or "")
                outcome = match.group(1) if match else "AssertionError"
        key, number = name, 1
        while key in found:
            number += 1
            key = f"{name}#{number}"
        found[key] = outcome
    return found


def classify(stock: str | None, series: str) -> str:
    """What the series does to one case, compared with stock 5.25.0."""
    if series in ("passed", "skipped"):
        return {"passed": "passes", "skipped": "skipped"}[series]
    if stock == series:
        return "fails as on 5.25.0"
    if series in CLEAR_ERRORS and stock not in ("passed", "skipped", None):
        return "refused clearly (5.25.0 fails)"
    return "WORSE"


def run(python: str, selection: list[str], report: Path, series: bool) -> None:
    env = {key: value for key, value in os.environ.items() if key != "CACHE_CROP_FIX_SERIES"}
    if series:
        env["CACHE_CROP_FIX_SERIES"] = "upstream"
    command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile"]
    command += [*selection, f"--junitxml={report}", *([] if series else ["--stock"])]
    subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    if not report.exists():
        raise SystemExit(f"the {'series' if series else 'stock'} run wrote no report: {' '.join(command)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("selection", nargs="*", default=list(SWEEPS), help="pytest selection (default: the sweeps)")
    parser.add_argument("--python", default=sys.executable, help="the 5.25 environment's python")
    parser.add_argument("--work-dir", type=Path, default=ROOT / "build" / "never-worse")
    args = parser.parse_args(argv)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    reports = {side: args.work_dir / f"{side}.xml" for side in ("stock", "series")}
    for side, report in reports.items():
        report.unlink(missing_ok=True)
        run(args.python, args.selection, report, series=side == "series")
    stock, series = outcomes(reports["stock"]), outcomes(reports["series"])
    verdicts = {case: classify(stock.get(case), outcome) for case, outcome in series.items()}
    counts = Counter(verdicts.values())
    print(f"the upstream series alone, against stock 5.25.0, on {len(verdicts)} cases of {' '.join(args.selection)}:")
    for verdict, count in sorted(counts.items()):
        print(f"  {verdict}: {count}")
    worse = sorted(case for case, verdict in verdicts.items() if verdict == "WORSE")
    for case in worse:
        print(f"  WORSE {case}: stock {stock.get(case, 'not run')}, series {series[case]}")
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
