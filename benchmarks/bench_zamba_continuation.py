"""Benchmarks Zamba's multi-token forward continuing a cache, stock vs fixed, on transformers 5.25 (step 8 of the 5.25
target: the cached SSM state is added to the scan's, with no loop over the tokens).

Stock 5.25.0 is wrong here (its scan restarts from zeros and ignores the cached state), but it is the speed reference:
the fix must stay within 1.25x of its time. A Zamba Mamba mixer of Zamba-7B's size, a smaller one and a 2-layer model
of the smaller size continue a cache of 16 tokens with 256 tokens (float32, batch 1, 1 thread), each time on a fresh
cache. Stock (`cache_crop_fix.revert()`) and fixed (`apply()`) alternate round by round; a round keeps the fastest of 2
runs and the table reports the medians over the rounds. The fixed recurrent states are first checked against those of
one forward over all the tokens. It prints the table and whether every ratio is within the budget.

    .venv-v5_25/bin/python benchmarks/bench_zamba_continuation.py            # about 2 minutes
    .venv-v5_25/bin/python benchmarks/bench_zamba_continuation.py --quick    # tiny sizes (smoke test)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

import cache_crop_fix
import transformers
from transformers import DynamicCache, ZambaConfig, ZambaForCausalLM
from transformers.models.zamba.modeling_zamba import ZambaMambaMixer


# label, hidden size, what runs: Zamba-7B's mixer (hidden size 3584, 2 Mamba heads, SSM state 16), a smaller one, and a
# 2-layer model of the smaller size (with its shared attention and MLP blocks)
CASES = (
    ("Zamba-7B-sized mixer", 3584, "mixer"),
    ("1024-wide mixer", 1024, "mixer"),
    ("1024-wide model", 1024, "model"),
)
QUICK_CASES = (("64-wide mixer", 64, "mixer"), ("64-wide model", 64, "model"))
PREFIX, TOKENS, ROUNDS, RUNS, BUDGET = 16, 256, 7, 2, 1.25


def _model(hidden: int) -> ZambaForCausalLM:
    torch.manual_seed(0)
    config = ZambaConfig(
        vocab_size=256,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2,
        num_attention_heads=8,
        num_key_value_heads=8,
        n_mamba_heads=2,
        mamba_d_state=16,
        layers_block_type=["hybrid"] * 2,
    )
    return ZambaForCausalLM(config).eval()


def _time_mixer(model, hidden_states) -> float:
    """The continuation forward of the first layer's mixer, over a cache its first `PREFIX` tokens filled."""
    mixer = next(module for module in model.modules() if isinstance(module, ZambaMambaMixer))
    cache = DynamicCache(config=model.config)
    mixer(hidden_states[:, :PREFIX], cache=cache)
    start = time.perf_counter()
    mixer(hidden_states[:, PREFIX:], cache=cache)
    return time.perf_counter() - start


def _time_model(model, input_ids) -> float:
    cache = DynamicCache(config=model.config)
    model(input_ids[:, :PREFIX], cache=cache)
    start = time.perf_counter()
    model(input_ids[:, PREFIX:], cache=cache)
    return time.perf_counter() - start


def _check(model, input_ids) -> None:
    """The fixed forward continuing a cache leaves the recurrent states of one forward over all the tokens."""
    cache = DynamicCache(config=model.config)
    model(input_ids[:, :PREFIX], cache=cache)
    model(input_ids[:, PREFIX:], cache=cache)
    expected = model(input_ids, use_cache=True).cache
    for layer_idx in range(model.config.num_hidden_layers):
        state, expected_state = cache.get_recurrent_state(layer_idx), expected.get_recurrent_state(layer_idx)
        torch.testing.assert_close(state, expected_state, rtol=1e-3, atol=1e-3 * expected_state.abs().max().item())


def _measure(run, args, rounds: int) -> dict[str, float]:
    """The median over the rounds of the fastest of `RUNS` runs, stock and fixed alternating."""
    times = {"stock": [], "fixed": []}
    for round_idx in range(rounds):
        for variant in ("stock", "fixed") if round_idx % 2 == 0 else ("fixed", "stock"):
            cache_crop_fix.revert() if variant == "stock" else cache_crop_fix.apply()
            times[variant].append(min(run(*args) for _ in range(RUNS)))
    cache_crop_fix.apply()
    return {variant: statistics.median(values) for variant, values in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes and few rounds (smoke test)")
    args = parser.parse_args(argv)
    cases, tokens, rounds = (QUICK_CASES, 32, 2) if args.quick else (CASES, TOKENS, ROUNDS)
    torch.set_num_threads(1)
    cache_crop_fix.apply()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, 1 thread, float32, batch 1")
    print(f"continuing a cache of {PREFIX} tokens with {tokens}; medians of {rounds} rounds, each the best of {RUNS}")
    print(f"\n| {'case':<22} | {'stock ms':>9} | {'fixed ms':>9} | {'fixed/stock':>11} |")
    print(f"|{'-' * 24}|{'-' * 11}|{'-' * 11}|{'-' * 13}|")
    worst = 0.0
    with torch.no_grad():
        for label, hidden, kind in cases:
            model = _model(hidden)
            input_ids = torch.randint(0, model.config.vocab_size, (1, PREFIX + tokens))
            _check(model, input_ids)
            if kind == "mixer":
                run, run_args = _time_mixer, (model, torch.randn(1, PREFIX + tokens, hidden))
            else:
                run, run_args = _time_model, (model, input_ids)
            run(*run_args)  # warm-up
            medians = _measure(run, run_args, rounds)
            ratio = medians["fixed"] / medians["stock"]
            worst = max(worst, ratio)
            stock, fixed = 1e3 * medians["stock"], 1e3 * medians["fixed"]
            print(f"| {label:<22} | {stock:>9.1f} | {fixed:>9.1f} | {ratio:>10.2f}x |")
    verdict = "within" if worst <= BUDGET else "OVER"
    print(f"\nworst ratio {worst:.2f}x: {verdict} the budget of {BUDGET}x stock's time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
