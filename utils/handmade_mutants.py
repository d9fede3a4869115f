"""Hand-made mutants of the 5.25 fix, run against the exported 5.25 tests (`tests/v5_25`) only (issue 42).

Each mutant is a slip a developer could make in one statement of an overlay: the kinds of the held-out set of issue 42
(compile and host-sync slips that keep the outputs right, slips in the upstream pull requests and the fork steps, and a
step-order slip). A mutant is written into a scratch copy of `src/` and the tests run with that copy first on
`PYTHONPATH`, so the work tree is never changed. A mutant survives if every test passes.

    .venv-v5_25/bin/python utils/handmade_mutants.py            # every mutant (about 1 minute each on 2 cores)
    .venv-v5_25/bin/python utils/handmade_mutants.py static-crop-0-kernels mtp-working-size   # some of them
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
OVERLAY = Path("src/cache_crop_fix/overlay/v5_25")


@dataclass(frozen=True)
class Mutant:
    name: str
    kind: str  # "compile/sync", "upstream PR", "fork step" or "step order"
    path: str  # under the 5.25 overlay
    old: str
    new: str


MUTANTS = (
    Mutant(
        "static-crop-0-kernels",
        "compile/sync",
        "step1_clamp/cache_utils.py",
        "        if tokens_to_remove == 0:  # `generate` calls `crop(0)` after every forward\n            return\n",
        "",
    ),
    Mutant(
        "static-crop-zeroes-keys",
        "compile/sync",
        "step1_clamp/cache_utils.py",
        "        self.cumulative_length.sub_(min(-tokens_to_remove, self.max_cache_len)).clamp_(min=0)\n",
        "        self.cumulative_length.sub_(min(-tokens_to_remove, self.max_cache_len)).clamp_(min=0)\n"
        "        self.keys.zero_()\n        self.values.zero_()\n",
    ),
    Mutant(
        "static-crop-host-read",
        "compile/sync",
        "step1_clamp/cache_utils.py",
        "        self.cumulative_length.sub_(min(-tokens_to_remove, self.max_cache_len)).clamp_(min=0)\n",
        "        self.cumulative_length.fill_(max(int(self.cumulative_length) + tokens_to_remove, 0))\n",
    ),
    Mutant(
        "static-crop-python-offset",
        "compile/sync",
        "step1_clamp/cache_utils.py",
        "        self.cumulative_length.sub_(min(-tokens_to_remove, self.max_cache_len)).clamp_(min=0)\n",
        "        self.cumulative_length = (self.cumulative_length - min(-tokens_to_remove, self.max_cache_len)).clamp(min=0)\n",
    ),
    Mutant(
        "linear-host-count-not-recording",
        "compile/sync",
        "step18_exact/cache_utils.py",
        "            self.cumulative_length_linear.add_(num_new_tokens)\n            if self.record_past:\n"
        "                self.num_tokens_linear += num_new_tokens\n",
        "            self.cumulative_length_linear.add_(num_new_tokens)\n            self.num_tokens_linear += num_new_tokens\n",
    ),
    Mutant(
        "linear-count-read-on-host",
        "compile/sync",
        "step18_exact/cache_utils.py",
        "        if self.record_past:\n            return self.num_tokens_linear\n",
        "        if self.record_past:\n            return int(self.cumulative_length_linear)\n",
    ),
    Mutant(
        "rollback-point-not-copied",
        "fork step",
        "step18_exact/cache_utils.py",
        "before_forward = self.recurrent_states[state_idx].clone()",
        "before_forward = self.recurrent_states[state_idx]",
    ),
    Mutant(
        "rollback-point-copied-for-long-forwards",
        "fork step",
        "step18_exact/cache_utils.py",
        "if self.is_recurrent_states_initialized[state_idx] and num_new_tokens <= self.recurrent_states_to_keep:",
        "if self.is_recurrent_states_initialized[state_idx]:",
    ),
    Mutant(
        "static-sliding-crop-not-rolled",
        "upstream PR",
        "step17_sliding/cache_utils.py",
        "            self.keys.copy_(self.keys.roll(shift, dims=-2))\n",
        "",
    ),
    Mutant(
        "static-sliding-no-room",
        "upstream PR",
        "step17_sliding/cache_utils.py",
        "max(recurrent_states_to_keep or 1, 1) - 1",
        "0",
    ),
    Mutant(
        "linear-crop-0-reads-device",
        "compile/sync",
        "step18_exact/cache_utils.py",
        "        num_tokens = self._num_tokens() if tokens_to_remove else self.num_tokens_linear\n",
        "        num_tokens = self._num_tokens()\n",
    ),
    Mutant(
        "history-keeps-one-too-few",
        "fork step",
        "step18_exact/cache_utils.py",
        "        del history[: max(len(history) - self.recurrent_states_to_keep, 0)]\n",
        "        del history[: max(len(history) - self.recurrent_states_to_keep + 1, 0)]\n",
    ),
    Mutant(
        "dsw-refusal-skipped-when-recording",
        "fork step",
        "step19_refuse/cache_utils.py",
        "        if max(seq_length + tokens_to_remove - self.sliding_window + 1, 0) < first_stored_token:\n",
        "        if max(seq_length + tokens_to_remove - self.sliding_window, 0) < first_stored_token:\n",
    ),
    Mutant(
        "dsw-empty-positive-accepted",
        "fork step",
        "step19_refuse/cache_utils.py",
        "            return super().crop(tokens_to_remove)\n",
        "            return\n",
    ),
    Mutant(
        "lookup-no-room-for-main-token",
        "upstream PR",
        "step5_lookup/generation/candidate_generator.py",
        "start_idx + self.max_length - input_length - 1)",
        "start_idx + self.max_length - input_length)",
    ),
    Mutant(
        "dflash-one-draft-too-many",
        "upstream PR",
        "step5_lookup/generation/candidate_generator.py",
        "outputs.last_hidden_state[:, 1 : max_new_tokens + 1]",
        "outputs.last_hidden_state[:, 1 : max_new_tokens + 2]",
    ),
    Mutant(
        "mtp-working-size-on-prefill",
        "upstream PR",
        "step12_mtp/generation/candidate_generator.py",
        '"if not self.is_main_model_prefill:\\n"',
        '"if self.is_main_model_prefill:\\n"',
    ),
    Mutant(
        "bailing-mtp-mlp-dense",
        "upstream PR",
        "step11_bailing/models/bailing_hybrid/configuration_bailing_hybrid.py",
        '["sparse"] * self.num_mtp_layers',
        '["dense"] * self.num_mtp_layers',
    ),
    Mutant(
        "refeed-ignores-short-prompt",
        "upstream PR",
        "step12_mtp/generation/candidate_generator.py",
        '"num_refed_tokens = min(self.num_mtp_layers, seen_tokens)\\n"',
        '"num_refed_tokens = self.num_mtp_layers\\n"',
    ),
    Mutant(
        "mask-static-check-ignores-encoder-decoder",
        "upstream PR",
        "step9_mask/masking_utils.py",
        '    cache = getattr(cache, "self_attention_cache", cache)\n',
        "",
    ),
    Mutant(
        "inkling-offset-not-cloned",
        "upstream PR",
        "step10_inkling/models/inkling/modeling_inkling.py",
        "q_offset = q_offset.clone()",
        "q_offset = q_offset",
    ),
    Mutant(
        "deepseek-assistant-not-refused",
        "fork step",
        "step20_deepseek/generation/candidate_generator.py",
        '"if cache is not None and not cache.is_croppable:\\n"',
        '"if cache is not None and not cache.is_croppable and False:\\n"',
    ),
    # A method that a later step defines again is mutated in the last step that defines it: the fix installs that one
    # (step 1's `StaticSlidingWindowLayer.crop` is step 19's on the fork branch, its `StaticIndexedLayer.crop` is the last of step 1)
    Mutant(
        "static-sliding-counter-not-clamped",
        "fork step",
        "step19_refuse/cache_utils.py",
        "        self.cumulative_length_int = max(self.cumulative_length_int + tokens_to_remove, 0)\n",
        "        self.cumulative_length_int = self.cumulative_length_int + tokens_to_remove\n",
    ),
    Mutant(
        "static-indexer-not-cropped",
        "upstream PR",
        "step1_clamp/cache_utils.py",
        "        if self.is_indexer_initialized and tokens_to_remove:\n",
        "        if self.is_indexer_initialized and tokens_to_remove < -1:\n",
    ),
)


def _focus(mutant: Mutant) -> str:
    """The exported test file that mirrors the mutated module (`cache_utils.py` -> `tests/v5_25/utils/test_cache_utils.py`)."""
    module = Path(mutant.path).relative_to(Path(mutant.path).parts[0])
    folder = "utils" if module.parent == Path(".") else str(module.parent)
    return f"tests/v5_25/{folder}/test_{module.name}"


def run(mutant: Mutant, scratch: Path, python: str, jobs: int) -> tuple[bool, str, float]:
    """Writes `mutant` into the scratch copy of `src/`, runs the exported tests and restores the file: first the test file
    that mirrors the mutated module (a failure there is a failure of `tests/v5_25`), then, if the mutant survived it, all
    of `tests/v5_25`. Returns (killed, the first failing test or "", seconds)."""
    path = scratch / OVERLAY / mutant.path
    original = path.read_text()
    if original.count(mutant.old) != 1:
        raise SystemExit(f"{mutant.name}: the statement to mutate is not in {mutant.path} exactly once")
    path.write_text(original.replace(mutant.old, mutant.new))
    start = time.monotonic()
    env = {**os.environ, "PYTHONPATH": str(scratch / "src")}
    try:
        for selection in ([_focus(mutant), "-x"], ["tests/v5_25", "-n", str(jobs)] if jobs > 1 else ["tests/v5_25"]):
            if not (ROOT / selection[0]).exists():
                continue
            command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *selection]
            result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
            failed = [line for line in result.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
            if result.returncode != 0:
                return True, (failed[0] if failed else result.stdout[-300:]), time.monotonic() - start
    finally:
        path.write_text(original)
    return False, "", time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="mutants to run (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="pytest-xdist workers")
    args = parser.parse_args()
    mutants = [mutant for mutant in MUTANTS if not args.names or mutant.name in args.names]
    with tempfile.TemporaryDirectory() as directory:
        scratch = Path(directory)
        shutil.copytree(ROOT / "src", scratch / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        survivors = []
        for mutant in mutants:
            killed, first, seconds = run(mutant, scratch, sys.executable, args.jobs)
            print(f"{'killed  ' if killed else 'SURVIVED'} {mutant.name} ({mutant.kind}, {seconds:.0f} s) {first}")
            if not killed:
                survivors.append(mutant.name)
    print(f"{len(mutants) - len(survivors)} of {len(mutants)} killed by tests/v5_25")
    sys.exit(1 if survivors else 0)


if __name__ == "__main__":
    main()
