"""Benchmarks assisted decoding with linear attention assistants (the history step: exact rollback from a state history).

The main model is a tiny random Llama (16 layers, hidden size 256). The assistants share its embeddings and its head,
so that their drafts are often accepted, and have layers of hidden size 256, sized to cost about the same per step:

- `qwen3_next`: Qwen3-Next-like, 2 gated delta net layers (conv and recurrent states) and 1 attention layer,
- `lfm2`: LFM2-like, 3 short-convolution layers (conv states only) and 1 attention layer,
- `llama`: the control, an attention-only Llama of the same shape.

Each is run with the rollback of the history step (`history`: the assistant cache is cropped exactly; step 7 of the
5.14 backport, step 6 of the 5.24 backport, step 2 of 5.25 `main`) and, for the linear attention assistants, with the full rollback of the earlier steps
(`full`: the assistant cache is emptied after every round and the assistant encodes the whole sequence again), and on
stock transformers of the installed target (`stock`: the whole fix reverted; on 5.14 the first rollback of a linear
attention assistant raises, on 5.24 it crops the conv states and leaves the recurrent states stale, #49036). Greedy
decoding without an assistant is the baseline. 64 new tokens, 5 drafts per round, 1 thread; every configuration runs once per round, in
an order rotated from round to round, and the table reports medians over the rounds. Each assisted output is checked
against greedy decoding.

It writes its section of `docs/source/en/benchmarks.md`, one per target (between the `bench_assisted_history` markers
for 5.14, `bench_assisted_history_<target>` for the others; appended if missing), so it runs after `benchmarks/bench_crop.py` in
`make bench`, once in each target's venv.

    .venv/bin/python benchmarks/bench_assisted_history.py                 # the full run (several minutes)
    .venv-v5_24/bin/python benchmarks/bench_assisted_history.py           # the same on transformers 5.24
    .venv-v5_25/bin/python benchmarks/bench_assisted_history.py           # 5.25: no `full` rollback to compare with
    .venv/bin/python benchmarks/bench_assisted_history.py --quick --out-dir /tmp/bench   # tiny sizes (smoke test)
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

import torch

import cache_crop_fix
import transformers
from cache_crop_fix.targets import target_for
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.cache_utils import LinearAttentionCacheLayerMixin
from transformers.generation.candidate_generator import AssistedCandidateGenerator


REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT_DIR = REPO / "docs" / "source" / "en"
TARGET = target_for(transformers.__version__)
# The history step of the installed target, e.g. "step 7" (5.14) or "step 6" (5.24)
HISTORY_STEP = next(
    f"step {index}" for index, step in enumerate(TARGET.steps, start=1) if step.package.endswith("_history")
)
MARKER = "bench_assisted_history" if TARGET.name == "v5_14" else f"bench_assisted_history_{TARGET.name}"
START, END = f"<!-- {MARKER}:start -->", f"<!-- {MARKER}:end -->"
# transformers 5.24 renamed the cache argument of models and of the assistant's keyword arguments
CACHE_KWARG = "past_key_values" if TARGET.name == "v5_14" else "cache"
NUM_ASSISTANT_TOKENS = 5
# The backports choose between an exact and a full rollback of the assistant cache (`full` measures the latter); on 5.25,
# upstream's per-token history rolls linear attention assistants back, and there is no full rollback to compare with
HAS_FULL_ROLLBACK = "_get_assistant_rollback" in AssistedCandidateGenerator.__dict__
ASSISTANTS = ("qwen3_next", "lfm2", "llama")


def _config(name: str, quick: bool):
    hidden = 64 if quick else 256
    common = {
        "vocab_size": 512 if quick else 2048,
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 8192,
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
        "tie_word_embeddings": False,
    }
    if name == "main":
        return LlamaConfig(num_hidden_layers=4 if quick else 16, **common)
    if name == "llama":
        return LlamaConfig(num_hidden_layers=4, **common)
    if name == "qwen3_next":
        # 3 layers: with the torch gated delta rule, a step costs about what 4 attention layers cost (see the table)
        return transformers.Qwen3NextConfig(
            num_hidden_layers=3,
            layer_types=["linear_attention"] * 2 + ["full_attention"],
            head_dim=hidden // 4,
            linear_num_key_heads=4,
            linear_num_value_heads=4,
            linear_key_head_dim=hidden // 4,
            linear_value_head_dim=hidden // 4,
            linear_conv_kernel_dim=4,
            mlp_only_layers=[0, 1, 2],
            **common,
        )
    if name == "lfm2":
        return transformers.Lfm2Config(
            num_hidden_layers=4, layer_types=["conv"] * 3 + ["full_attention"], conv_L_cache=3, **common
        )
    raise ValueError(name)


def _damp(model, scale: float) -> None:
    """Scales the projections inside the decoder layers, so that each layer changes the residual stream little: the
    next token then depends mostly on the last one (through the embeddings and the head, which the assistants share
    with the main model), and the drafts of the assistants are often accepted."""
    with torch.no_grad():
        for name, module in model.named_modules():
            if ".layers." in name and isinstance(module, (torch.nn.Linear, torch.nn.Conv1d)):
                module.weight.mul_(scale)


def build_models(quick: bool, scale: float) -> tuple[LlamaForCausalLM, dict]:
    torch.manual_seed(0)
    main = LlamaForCausalLM(_config("main", quick)).eval()
    _damp(main, scale)
    assistants = {}
    for seed, name in enumerate(ASSISTANTS, start=1):
        torch.manual_seed(seed)
        config = _config(name, quick)
        model = transformers.AutoModelForCausalLM.from_config(config).eval()
        with torch.no_grad():
            model.get_input_embeddings().weight.copy_(main.get_input_embeddings().weight)
            model.get_output_embeddings().weight.copy_(main.get_output_embeddings().weight)
        _damp(model, scale)
        assistants[name] = model
    for model in (main, *assistants.values()):
        model.generation_config.eos_token_id = None
        model.generation_config.pad_token_id = None
        model.generation_config.num_assistant_tokens = NUM_ASSISTANT_TOKENS
        model.generation_config.num_assistant_tokens_schedule = "constant"
        model.generation_config.assistant_confidence_threshold = 0.0
    return main, assistants


@contextlib.contextmanager
def full_rollback():
    """The behaviour of steps 1-6: the assistant cache is emptied after every round (the assistant re-encodes)."""
    original = AssistedCandidateGenerator.__dict__["_get_assistant_rollback"]
    AssistedCandidateGenerator._get_assistant_rollback = lambda self, cache: "full"
    try:
        yield
    finally:
        AssistedCandidateGenerator._get_assistant_rollback = original


@contextlib.contextmanager
def stock():
    """Stock transformers of the installed target: the whole fix reverted."""
    cache_crop_fix.revert()
    try:
        yield
    finally:
        cache_crop_fix.apply()


def history_bytes(past_key_values) -> tuple[int, int]:
    """Bytes held by the linear attention histories (entries and the conv copy), and one update's state bytes."""
    held = state = 0
    seen = set()
    for layer in getattr(past_key_values, "layers", ()):
        if not isinstance(layer, LinearAttentionCacheLayerMixin):
            continue
        if layer.is_recurrent_states_initialized[0]:
            state += layer.recurrent_states[0].nbytes + layer.conv_states[0][..., -layer.conv_kernel_size[0] :].nbytes
        tensors = [getattr(layer, "_history_conv_state", None)]
        for entry in getattr(layer, "history", None) or ():  # the backports: one entry per update
            tensors += list(entry)
        for states in (getattr(layer, "recurrent_states_history", None) or {}).values():  # 5.25: per-token states
            tensors += list(states)
        for tensor in tensors:
            if isinstance(tensor, torch.Tensor) and id(tensor) not in seen:
                seen.add(id(tensor))
                held += tensor.nbytes
    return held, state


class Run:
    """One assisted (or greedy) generation, with what the assistant did."""

    def __init__(self, main, assistant, prompt, new_tokens):
        self.forward_lengths, self.rounds, self.peak_history, self.state_bytes = [], 0, 0, 0
        self.error = None
        hook = None
        original = AssistedCandidateGenerator.__dict__["_update_past_and_masks"]
        run = self

        def spy(generator, input_ids, *args, **kwargs):  # its other arguments differ between releases
            has_past = original(generator, input_ids, *args, **kwargs)
            run.rounds += 1
            held, state = history_bytes(generator.assistant_kwargs.get(CACHE_KWARG))
            run.peak_history = max(run.peak_history, held)
            run.state_bytes = max(run.state_bytes, state)
            return has_past

        kwargs = {}
        self.step_seconds = []
        if assistant is not None:
            kwargs["assistant_model"] = assistant

            def before(module, args, kw):
                self.forward_lengths.append(kw["input_ids"].shape[-1])
                self._forward_start = time.perf_counter()

            def after(module, args, kw, output):
                if kw["input_ids"].shape[-1] == 1:
                    self.step_seconds.append(time.perf_counter() - self._forward_start)

            hook = [
                assistant.register_forward_pre_hook(before, with_kwargs=True),
                assistant.register_forward_hook(after, with_kwargs=True),
            ]
            AssistedCandidateGenerator._update_past_and_masks = spy
        try:
            start = time.perf_counter()
            with torch.no_grad():
                try:
                    self.output = main.generate(prompt, do_sample=False, max_new_tokens=new_tokens, **kwargs)
                except (ValueError, RuntimeError) as error:  # stock 5.14: the first rollback of the assistant raises
                    self.output, self.error = None, error
            self.seconds = time.perf_counter() - start
        finally:
            if hook is not None:
                for handle in hook:
                    handle.remove()
                AssistedCandidateGenerator._update_past_and_masks = original

    @property
    def input_tokens(self) -> int:
        return sum(self.forward_lengths)

    @property
    def reencodes(self) -> int:
        """Assistant forward passes after the first one that process the sequence again (more than 2 tokens)."""
        return sum(length > 2 for length in self.forward_lengths[1:])


def write_section(out_dir: Path, start: str, end: str, section: str) -> None:
    """Writes `section` (from its `start` marker to its `end` one) into `out_dir/benchmarks.md`, in place of the one
    between these markers, or appended if there is none; and prints it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    report = out_dir / "benchmarks.md"
    text = report.read_text(encoding="utf-8") if report.exists() else ""
    if start in text and end in text:
        before, rest = text.split(start, 1)
        text = before + section + rest.split(end, 1)[1].lstrip("\n")
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + section
    report.write_text(text, encoding="utf-8")
    print(section)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one round (smoke test)")
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR)
    parser.add_argument("--prompt-lengths", type=int, nargs="*", default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--scale", type=float, default=0.2, help="scale of the projections inside decoder layers")
    parser.add_argument("--assistants", nargs="*", default=list(ASSISTANTS), choices=ASSISTANTS)
    parser.add_argument("--no-stock", action="store_true", help="do not measure stock transformers")
    args = parser.parse_args(argv)
    quick = args.quick
    prompt_lengths = args.prompt_lengths or ([16, 32] if quick else [64, 256, 1024, 4096])
    rounds = args.rounds or (1 if quick else 3)
    new_tokens = 16 if quick else 64

    torch.set_num_threads(1)
    cache_crop_fix.apply()
    main_model, assistants = build_models(quick, args.scale)
    configurations = [("greedy", None, None)]
    for name in args.assistants:
        configurations.append((name, "history" if name != "llama" else "exact", assistants[name]))
        if name != "llama":
            if HAS_FULL_ROLLBACK:
                configurations.append((name, "full", assistants[name]))
            if not args.no_stock:
                configurations.append((name, "stock", assistants[name]))

    results = {}
    started = time.perf_counter()
    for prompt_length in prompt_lengths:
        prompt = torch.randint(
            3, main_model.config.vocab_size, (1, prompt_length), generator=torch.Generator().manual_seed(0)
        )
        Run(main_model, assistants["llama"], prompt[:, :16], 4)  # warm-up
        for round_idx in range(rounds):
            shift = round_idx % len(configurations)
            for name, mode, assistant in configurations[shift:] + configurations[:shift]:
                context = {"full": full_rollback, "stock": stock}.get(mode, contextlib.nullcontext)
                with context():
                    run = Run(main_model, assistant, prompt, new_tokens)
                results.setdefault((prompt_length, name, mode), []).append(run)
            print(
                f"prompt {prompt_length}, round {round_idx + 1}/{rounds}: {time.perf_counter() - started:.0f} s",
                file=sys.stderr,
            )

    python = ".venv/bin/python" if TARGET.name == "v5_14" else f".venv-{TARGET.name}/bin/python"
    stock_note = (
        "its first rollback of a linear attention assistant raises (the assistant cache does not record its past)"
        if TARGET.name == "v5_14"
        else "the assistant records `N` per-token states for a forward of `N + 1` tokens, so a round that rejects every "
        "draft restores the state from before the forward (#49036's follow-up; the output still equals greedy, since the "
        "main model verifies every draft; fewer drafts are accepted)"
        if TARGET.name == "v5_25"
        else "the assistant cache records its past, and `crop` removes the drafts from the conv states but leaves the "
        "recurrent states of the Qwen3-Next-like assistant stale (#49036): fast, and wrong (the output still equals "
        "greedy, since the main model verifies every draft; fewer drafts are accepted)"
    )
    lines = [
        START,
        # The 5.14 heading is linked from cache_crop.md as it is
        f"## Assisted decoding with linear attention assistants ({HISTORY_STEP})"
        if TARGET.name == "v5_14"
        else f"## Assisted decoding with linear attention assistants on the {TARGET.label} ({HISTORY_STEP})",
        "",
        f"`{' '.join([python, 'benchmarks/bench_assisted_history.py', *(argv if argv is not None else sys.argv[1:])]).strip()}`"
        f" (also run by `make bench`). Main model: random Llama, {main_model.config.num_hidden_layers} layers, hidden "
        f"size {main_model.config.hidden_size}; assistants of the same hidden size sharing its embeddings and head "
        "(Qwen3-Next-like: 2 gated delta net layers + 1 attention layer; LFM2-like: 3 short-convolution layers + 1 "
        "attention layer; control: 4 Llama layers), with the projections inside all decoder layers scaled by "
        f"{args.scale} so that drafts are often accepted. {new_tokens} new tokens, {NUM_ASSISTANT_TOKENS} drafts per round, greedy, 1 thread, "
        f"{rounds} interleaved rounds (medians). torch {torch.__version__}, transformers {transformers.__version__}.",
        "",
        f"- **rollback**: `history` = {HISTORY_STEP} (exact crop of the assistant cache); "
        + (
            "`full` = the earlier steps (the assistant cache is emptied after every round and the assistant encodes "
            "the whole sequence again); "
            if HAS_FULL_ROLLBACK
            else ""
        )
        + f"`stock` = stock transformers {transformers.__version__}: {stock_note}.",
        "- **speed-up**: greedy time / assisted time (median of the per-round ratios).",
        "- **assistant step**: median time of the assistant's one-token forward passes (the attention-only control "
        "is sized to cost about as much as the linear attention assistants).",
        "- **assistant input tokens**: tokens the assistant processed (prompt included); **re-encodes**: its "
        "forward passes, after the first, over more than 2 tokens.",
        "- **history memory**: the most the linear attention histories held at once (recurrent states are kept "
        "without copy: without the history they would be freed); **state / update**: the bytes of the linear "
        "attention states of one update (the bound is that times the history length, here "
        f"{NUM_ASSISTANT_TOKENS + 1}).",
        "",
        "| prompt | assistant | rollback | time (s) | speed-up vs greedy | tokens / round | assistant step (ms) "
        "| assistant input tokens | re-encodes | history memory | state / update | output = greedy |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for prompt_length in prompt_lengths:
        greedy = results[(prompt_length, "greedy", None)]
        greedy_output = greedy[0].output.tolist()
        lines.append(
            f"| {prompt_length} | (none: greedy) | | {statistics.median(r.seconds for r in greedy):.2f} | 1.00× | 1.00 "
            "| | | | | | |"
        )
        for name, mode, _ in configurations[1:]:
            runs = results[(prompt_length, name, mode)]
            run = runs[0]
            if run.error is not None:
                lines.append(
                    f"| {prompt_length} | {name} | {mode} | raises `{type(run.error).__name__}` | | | | | | | | |"
                )
                continue
            ratios = [g.seconds / r.seconds for g, r in zip(greedy, runs)]
            same = all(r.output.tolist() == greedy_output for r in runs)
            history = f"{run.peak_history / 1024:.0f} KiB" if mode == "history" else ""
            state = f"{run.state_bytes / 1024:.0f} KiB" if run.state_bytes else ""
            lines.append(
                f"| {prompt_length} | {name} | {mode} | {statistics.median(r.seconds for r in runs):.2f} "
                f"| {statistics.median(ratios):.2f}× | {new_tokens / max(run.rounds - 1, 1):.2f} "
                f"| {1000 * statistics.median(t for r in runs for t in r.step_seconds):.1f} | {run.input_tokens} "
                f"| {run.reencodes} | {history} | {state} | {'yes' if same else '**no**'} |"
            )
    lines += ["", END, ""]
    section = "\n".join(lines)

    write_section(args.out_dir, START, END, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
