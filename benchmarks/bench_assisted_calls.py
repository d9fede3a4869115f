"""Benchmarks assisted decoding with an assistant that is accepted often over a long generation (issue 39): what the
assistant is fed, how long its cache grows, and the speed-up over greedy decoding, stock and fixed, on the installed
target. Run in each target's venv (`make bench` runs it in all three): the 5.14.1 row is the reference the fix must
match on the other lines.

The models are those of `benchmarks/bench_assisted_history.py` (a random 16-layer Llama; a 4-layer Llama assistant
sharing its embeddings and head, all decoder projections scaled down so that the drafts are often accepted), 256 new
tokens, 5 drafts per round, greedy, 1 thread; the configurations run in turn, 3 rounds, medians. Each assisted output
is checked against greedy decoding.

    .venv-v5_25/bin/python benchmarks/bench_assisted_calls.py           # writes its section of benchmarks.md
    .venv-v5_25/bin/python benchmarks/bench_assisted_calls.py --quick --out-dir /tmp/bench   # tiny sizes
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from bench_assisted_history import CACHE_KWARG, DEFAULT_OUT_DIR, TARGET, build_models, write_section

import cache_crop_fix
import transformers
from transformers.generation.candidate_generator import AssistedCandidateGenerator


MARKER = f"bench_assisted_calls_{TARGET.name}"
START, END = f"<!-- {MARKER}:start -->", f"<!-- {MARKER}:end -->"


@dataclass
class Run:
    seconds: float
    output: list
    fed_tokens: int = 0  # tokens the assistant's forward passes processed
    peak_cache: int = 0  # the most tokens the assistant's cache held after a round
    rounds: int = 0
    spans: list = field(default_factory=list)


def _assisted(main, assistant, input_ids, new_tokens) -> Run:
    run = Run(0.0, [])
    forward = assistant.forward

    @functools.wraps(forward)  # keeps the signature: `generate` reads it (`accepts_attention_mask`)
    def counting_forward(*args, **kwargs):
        run.fed_tokens += kwargs["input_ids"].shape[1]
        return forward(*args, **kwargs)

    get_candidates = AssistedCandidateGenerator.get_candidates

    def measuring_get_candidates(self, *args, **kwargs):
        result = get_candidates(self, *args, **kwargs)
        run.rounds += 1
        cache = self.assistant_kwargs.get(CACHE_KWARG)
        run.peak_cache = max(run.peak_cache, int(cache.get_seq_length()) if cache is not None else 0)
        return result

    assistant.forward, AssistedCandidateGenerator.get_candidates = counting_forward, measuring_get_candidates
    try:
        started = time.perf_counter()
        output = main.generate(input_ids, assistant_model=assistant, max_new_tokens=new_tokens, do_sample=False)
        run.seconds = time.perf_counter() - started
    finally:
        del assistant.forward
        AssistedCandidateGenerator.get_candidates = get_candidates
    run.output = output.tolist()
    return run


def _greedy(main, input_ids, new_tokens) -> Run:
    started = time.perf_counter()
    output = main.generate(input_ids, max_new_tokens=new_tokens, do_sample=False)
    return Run(time.perf_counter() - started, output.tolist())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one round (smoke test)")
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR)
    parser.add_argument("--scale", type=float, default=0.05, help="scale of the projections inside decoder layers")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    new_tokens, rounds = (32, 1) if args.quick else (256, 3)
    main_model, assistants = build_models(args.quick, scale=args.scale)
    assistant = assistants["llama"]
    input_ids = torch.randint(0, main_model.config.vocab_size, (1, 16), generator=torch.Generator().manual_seed(0))

    results = {"greedy": [], "stock": [], "fixed": []}
    for _ in range(rounds):
        for mode in results:
            if mode == "stock":
                cache_crop_fix.revert()
            else:
                cache_crop_fix.apply()
            if mode == "greedy":
                results[mode].append(_greedy(main_model, input_ids, new_tokens))
            else:
                results[mode].append(_assisted(main_model, assistant, input_ids, new_tokens))
    cache_crop_fix.apply()

    greedy = results["greedy"]
    python = ".venv/bin/python" if TARGET.name == "v5_14" else f".venv-{TARGET.name}/bin/python"
    lines = [
        START,
        f"## Assisted decoding over a long generation on the {TARGET.label} (issue 39)",
        "",
        f"`{python} benchmarks/bench_assisted_calls.py{' --quick' if args.quick else ''}` (also run by `make bench`). "
        f"Main model: random Llama, {main_model.config.num_hidden_layers} layers; assistant: "
        f"{assistant.config.num_hidden_layers}-layer Llama sharing its embeddings and head, the projections inside all "
        f"decoder layers scaled by {args.scale} (drafts often accepted). "
        f"Prompt of {input_ids.shape[1]} tokens, {new_tokens} new tokens, 5 drafts per round, greedy, 1 thread, "
        f"{rounds} rounds (medians). torch {torch.__version__}, transformers {transformers.__version__}.",
        "",
        "- **fed tokens**: the tokens the assistant's forward passes processed: the prompt, then each round the "
        "main model's new tokens and the drafts (rejected ones included); an assistant fed the whole sequence every "
        "round would count tens of thousands. **peak cache**: the most tokens its cache held after a round (at most "
        "the sequence).",
        "",
        "| decoding | time (s) | tokens / s | speed-up vs greedy | rounds | fed tokens | peak cache | output = greedy |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
        f"| greedy | {statistics.median(r.seconds for r in greedy):.2f} "
        f"| {new_tokens / statistics.median(r.seconds for r in greedy):.0f} | 1.00× | | | | |",
    ]
    for mode in ("stock", "fixed"):
        runs = results[mode]
        seconds = statistics.median(r.seconds for r in runs)
        ratio = statistics.median(g.seconds / r.seconds for g, r in zip(greedy, runs))
        same = all(r.output == greedy[0].output for r in runs)
        lines.append(
            f"| assisted, {mode} | {seconds:.2f} | {new_tokens / seconds:.0f} | {ratio:.2f}× | {runs[0].rounds} "
            f"| {runs[0].fed_tokens} | {runs[0].peak_cache} | {'yes' if same else '**no**'} |"
        )
    lines += ["", END, ""]
    section = "\n".join(lines)

    write_section(args.out_dir, START, END, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
