"""Benchmarks `Cache.crop` with the fix (`cache_crop_fix.apply()`) against stock transformers (`revert()`).

Every figure is measured in this one process, with stock, fixed and the floor (the bare tensor work of a crop)
interleaved round by round, and reported as a median with its interquartile range. It writes the section of the
installed target (5.14.x: `v5_14`, 5.24.x: `v5_24`, 5.25.x: `v5_25`) of `docs/source/en/benchmarks.md`, keeping the other sections,
and `docs/source/en/crop_latency_<target>.png`.

    make bench                                         # every target, each in its venv
    .venv/bin/python benchmarks/bench_crop.py --quick --out-dir /tmp/bench   # tiny sizes, seconds (smoke test)
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
import timeit
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

import cache_crop_fix
import transformers
from cache_crop_fix.syncs import SyncCounter
from cache_crop_fix.targets import target_for
from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, PreTrainedConfig, StaticCache, cache_utils
from transformers.cache_utils import Cache, DynamicCache


REPO = Path(__file__).resolve().parent.parent
TARGET = target_for(transformers.__version__)
# From 5.15 on, `crop(0)` removes nothing (the argument is `tokens_to_remove`); on 5.14 it empties the cache
ZERO_REMOVES_NOTHING = TARGET is not None and TARGET.name != "v5_14"
# The page's target sections, the `main` target first
SECTION_ORDER = ("v5_25", "v5_24", "v5_14")
VENVS = {"v5_14": ".venv", "v5_24": ".venv-v5_24", "v5_25": ".venv-v5_25"}
DEFAULT_OUT_DIR = REPO / "docs" / "source" / "en"
VARIANTS = ("stock", "fixed", "floor")
NUM_HEADS, HEAD_DIM, DTYPE = 8, 128, torch.float32


@dataclass(frozen=True)
class Sizes:
    layer_counts: tuple[int, ...]
    seq_lengths: tuple[int, ...]
    rounds: int
    batches: int  # short timed batches per round and variant: the round keeps the fastest
    layer_crops_per_batch: int  # a timed batch crops ~this many layers, spread over `max(min_caches, .. // L)` caches
    min_caches: int
    sliding_layers: int
    sliding_window: int
    sliding_seq_lengths: tuple[int, ...]
    hybrid_layers: int
    hybrid_seq_lengths: tuple[int, ...]
    conv_dim: int
    conv_kernel: int
    e2e_runs: int  # at least `min_runs` (5), more while the section is within `e2e_budget`
    e2e_new_tokens: int
    e2e_prompts: int
    import_rounds: int  # likewise, at least `min_runs`
    min_runs: int
    section_budget: float  # seconds
    e2e_budget: float  # seconds: end to end, a 2% effect needs many groups to stand out of the noise


FULL = Sizes(
    layer_counts=(1, 32, 80),
    seq_lengths=(128, 4096, 32768),
    rounds=13,
    batches=5,
    layer_crops_per_batch=240,
    min_caches=3,
    sliding_layers=32,
    sliding_window=8192,
    sliding_seq_lengths=(128, 4096),
    hybrid_layers=32,
    hybrid_seq_lengths=(128, 4096),
    conv_dim=1024,
    conv_kernel=4,
    e2e_runs=24,
    e2e_new_tokens=24,
    e2e_prompts=2,
    import_rounds=7,
    min_runs=5,
    section_budget=60.0,
    e2e_budget=240.0,
)
QUICK = Sizes(
    layer_counts=(1, 2),
    seq_lengths=(16, 64),
    rounds=3,
    batches=2,
    layer_crops_per_batch=16,
    min_caches=2,
    sliding_layers=2,
    sliding_window=128,
    sliding_seq_lengths=(16, 64),
    hybrid_layers=2,
    hybrid_seq_lengths=(16, 64),
    conv_dim=16,
    conv_kernel=4,
    e2e_runs=1,
    e2e_new_tokens=6,
    e2e_prompts=1,
    import_rounds=1,
    min_runs=1,
    section_budget=0.0,
    e2e_budget=0.0,
)


# ----------------------------------------------------------------------------------------------------------------
# Statistics and formatting
# ----------------------------------------------------------------------------------------------------------------


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(25th percentile, median, 75th percentile)."""
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def median(values: list[float]) -> float:
    return statistics.median(values)


def fmt(values: list[float], digits: int = 1) -> str:
    """Median and interquartile range, e.g. `12.3 (11.9–12.8)`."""
    q1, q2, q3 = quartiles(values)
    return f"{q2:.{digits}f} ({q1:.{digits}f}–{q3:.{digits}f})"


def paired_ratios(numerators: list[float], denominators: list[float]) -> list[float]:
    """Ratios of measurements taken in the same round (so they share that round's machine noise)."""
    return [a / b for a, b in zip(numerators, denominators)]


def set_variant(variant: str) -> None:
    if variant == "stock":
        cache_crop_fix.revert()
    elif variant == "fixed":
        cache_crop_fix.apply()


def rotated(items: tuple[str, ...], shift: int) -> tuple[str, ...]:
    shift %= len(items)
    return items[shift:] + items[:shift]


def count_syncs(crop, arg) -> int | str:
    """The host syncs of one `crop(arg)` call (untimed), or the name of the error it raised."""
    try:
        with SyncCounter() as counter:
            crop(arg)
    except Exception as error:  # stock static layers have no `crop`
        return type(error).__name__
    return counter.count


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# ----------------------------------------------------------------------------------------------------------------
# Caches to crop. Crop never copies, so every layer of every cache holds views of one key and one value tensor per
# sequence length: an 80-layer cache of 32k tokens addresses 20 GiB but allocates 256 MiB.
# ----------------------------------------------------------------------------------------------------------------


def crop_target(arg: int, seq: int) -> int:
    """The length the fixed `crop(arg)` keeps (the floor slices to it)."""
    if arg < 0 or (arg == 0 and ZERO_REMOVES_NOTHING):
        return max(seq + arg, 0)
    return min(arg, seq)


def crop_ops(seq: int, kind: str, timed: bool = True) -> list[tuple[str, int]]:
    ops = [("crop(-1)", -1), ("crop(-4)", -4)]
    # Stock cannot roll a hybrid layer back fully (see the report), so only partial crops of it are timed
    if kind != "hybrid" or not timed:
        ops += [("crop(-L-1)", -(seq + 1)), ("crop(0)", 0)]
    return ops


class Group:
    """`count` caches of one kind, `layers` layers and `seq` tokens, restorable to their full state."""

    def __init__(self, kind: str, layers: int, seq: int, count: int, sizes: Sizes, tensors: dict):
        self.kind, self.layers, self.seq, self.sizes = kind, layers, seq, sizes
        if seq not in tensors:
            shape = (1, NUM_HEADS, seq, HEAD_DIM)
            tensors[seq] = (torch.randn(shape, dtype=DTYPE), torch.randn(shape, dtype=DTYPE))
        self.keys, self.values = tensors[seq]
        self.conv = torch.randn(1, sizes.conv_dim, seq, dtype=DTYPE) if kind == "hybrid" else None
        self.caches = [self._build() for _ in range(count)]
        self.layer_lists = [cache.layers for cache in self.caches]

    def _build(self) -> Cache:
        one_key, one_value = self.keys[..., :1, :], self.values[..., :1, :]
        if self.kind == "dynamic":
            cache = DynamicCache()
        elif self.kind == "sliding":
            config = MistralConfig(sliding_window=self.sizes.sliding_window, num_hidden_layers=self.layers)
            cache = DynamicCache(config=config)
        else:
            config = PreTrainedConfig(layer_types=["hybrid"] * self.layers, num_hidden_layers=self.layers)
            cache = DynamicCache(config=config)
            cache.activate_past_recording()
        for layer_idx in range(self.layers):
            # The real API creates and initialises each layer; its states are then made views of the shared tensors
            cache.update(one_key, one_value, layer_idx)
            if self.kind == "hybrid":
                layer = cache.layers[layer_idx]
                # Conv states only: a recurrent state summarizes every past token, so the fix refuses partial crops
                # of a layer that has one (stock silently keeps it)
                layer.update_conv_state(self.conv, conv_kernel_size=self.sizes.conv_kernel)
        assert len(cache.layers) == self.layers
        if self.kind == "hybrid":
            # What the linear attention part holds besides its tensors (on 5.25 its token counts, which a crop moves)
            self.linear_state = {
                name: value for name, value in vars(cache.layers[0]).items() if not isinstance(value, torch.Tensor)
            }
        self.restore_cache(cache)
        return cache

    def restore_cache(self, cache: Cache) -> None:
        for layer in cache.layers:
            # A full rollback may have put the layer back as it was built (5.14's `crop(0)`): initialized again here
            layer.keys, layer.values, layer.is_initialized = self.keys, self.values, True
            if self.kind == "sliding":
                layer.cumulative_length = self.seq
            elif self.kind == "hybrid":
                for name, value in self.linear_state.items():
                    # One level of copy: a crop changes the entries of these dicts (the tensors are views or replaced)
                    setattr(
                        layer,
                        name,
                        {k: list(v) if isinstance(v, list) else v for k, v in value.items()}
                        if isinstance(value, dict)
                        else value,
                    )
                layer.conv_states[0] = self.conv
                if isinstance(getattr(layer, "cumulative_length_linear", None), torch.Tensor):
                    layer.cumulative_length_linear.fill_(self.seq)  # 5.25: moved in place by a crop

    def restore(self) -> None:
        """Puts every cache back to `seq` tokens by reassigning saved references (no tensor work)."""
        for cache in self.caches:
            self.restore_cache(cache)

    def time_crop(self, arg: int) -> int:
        caches = self.caches
        start = time.perf_counter_ns()
        for cache in caches:
            cache.crop(arg)
        return time.perf_counter_ns() - start

    def time_floor(self, arg: int) -> int:
        """The tensor work of a crop and nothing else: view slices of each layer's states, stored back."""
        new_length = crop_target(arg, self.seq)
        layer_lists = self.layer_lists
        if self.kind == "hybrid":
            kernel = self.sizes.conv_kernel
            start = time.perf_counter_ns()
            for layers in layer_lists:
                for layer in layers:
                    layer.keys = layer.keys[..., :new_length, :]
                    layer.values = layer.values[..., :new_length, :]
                    layer.conv_states[0] = layer.conv_states[0][..., arg - kernel : arg]
            return time.perf_counter_ns() - start
        start = time.perf_counter_ns()
        for layers in layer_lists:
            for layer in layers:
                layer.keys = layer.keys[..., :new_length, :]
                layer.values = layer.values[..., :new_length, :]
        return time.perf_counter_ns() - start

    def result(self) -> str:
        """What the first cache holds now (to show what each variant did)."""
        layer = self.caches[0].layers[0]
        text = str(layer.keys.shape[-2]) if layer.is_initialized else "0"  # 5.14 crop(0): back as built
        if self.kind == "hybrid":
            text += f", conv {layer.conv_states[0].shape[-1]}"
        return text


def measure_latency(sizes: Sizes, log) -> dict:
    """Per-call latency of `Cache.crop` for every kind, size and op; stock, fixed and floor interleaved."""
    warnings.filterwarnings("ignore", category=FutureWarning)  # crop(0) warns (fixed): set once, outside the timing
    tensors: dict = {}
    groups = []
    for layers in sizes.layer_counts:
        count = max(sizes.min_caches, sizes.layer_crops_per_batch // layers)
        for seq in sizes.seq_lengths:
            groups.append(Group("dynamic", layers, seq, count, sizes, tensors))
    sliding_count = max(sizes.min_caches, sizes.layer_crops_per_batch // sizes.sliding_layers)
    for seq in sizes.sliding_seq_lengths:
        assert seq < sizes.sliding_window
        groups.append(Group("sliding", sizes.sliding_layers, seq, sliding_count, sizes, tensors))
    for seq in sizes.hybrid_seq_lengths:
        groups.append(Group("hybrid", sizes.hybrid_layers, seq, sliding_count, sizes, tensors))
    # Small caches of each kind, cropped after each apply()/revert() so that the interpreter's specialised call sites
    # are warm again before the timed batch
    warm = {kind: Group(kind, 2, 16, 4, sizes, {}) for kind in ("dynamic", "sliding", "hybrid")}

    samples = defaultdict(list)  # (kind, layers, seq, op, variant) -> µs per call, one per round
    results = {}  # (kind, layers, seq, op, variant) -> what the cache holds after the crop
    syncs = {}  # (kind, layers, seq, op, variant) -> host syncs of one crop (round 0, untimed)
    for round_idx in range(sizes.rounds):
        start = time.perf_counter()
        gc.collect()
        for group_idx, group in enumerate(groups):
            for op_idx, (op, arg) in enumerate(crop_ops(group.seq, group.kind)):
                for variant in rotated(VARIANTS, round_idx + group_idx + op_idx):
                    set_variant(variant)
                    if variant != "floor":
                        warm_group = warm[group.kind]
                        warm_arg = -(warm_group.seq + 1) if arg < -4 else arg
                        for _ in range(2):
                            warm_group.restore()
                            warm_group.time_crop(warm_arg)
                    fastest = None
                    for _ in range(sizes.batches):
                        group.restore()
                        gc.disable()
                        elapsed = group.time_floor(arg) if variant == "floor" else group.time_crop(arg)
                        gc.enable()
                        fastest = elapsed if fastest is None else min(fastest, elapsed)
                    key = (group.kind, group.layers, group.seq, op, variant)
                    samples[key].append(fastest / 1e3 / len(group.caches))
                    if round_idx == 0:
                        if variant != "floor":
                            group.restore()
                            syncs[key] = count_syncs(group.caches[0].crop, arg)
                        results[key] = group.result()
                    elif group.result() != results[key]:
                        # `restore` must put back everything a crop changes, or later rounds time another crop
                        raise RuntimeError(
                            f"{key}: round {round_idx + 1} left {group.result()}, round 1 {results[key]}"
                        )
        log(f"  latency round {round_idx + 1}/{sizes.rounds}: {time.perf_counter() - start:.1f} s")
    # What the untimed ops do to a hybrid cache (a fresh one each time: a full rollback may zero states in place)
    for seq in sizes.hybrid_seq_lengths:
        for op, arg in crop_ops(seq, "hybrid", timed=False)[2:]:
            for variant in ("stock", "fixed"):
                set_variant(variant)
                group = Group("hybrid", sizes.hybrid_layers, seq, 1, sizes, tensors)
                group.time_crop(arg)
                results[("hybrid", group.layers, seq, op, variant)] = group.result()
    cache_crop_fix.apply()
    for group in groups:
        group.restore()
    return {"samples": samples, "results": results, "syncs": syncs, "tensors": tensors}


def measure_syncs() -> dict:
    """Host syncs per `Cache.crop` call of small dynamic and static caches (8 layers, 10 tokens), stock and fixed,
    with plain int arguments and with a 0-d tensor (as `generate` passes)."""
    config = {"hidden_size": 8, "num_attention_heads": 1, "num_key_value_heads": 1, "head_dim": 1}
    makers = {
        "DynamicCache()": DynamicCache,
        "StaticCache": lambda: StaticCache(config=MistralConfig(num_hidden_layers=8, **config), max_cache_len=16),
        "StaticCache (sliding window)": lambda: StaticCache(
            config=MistralConfig(num_hidden_layers=8, sliding_window=16, **config), max_cache_len=16
        ),
    }
    states = torch.arange(10, dtype=DTYPE).reshape(1, 1, 10, 1)
    counts = {}
    for variant in ("stock", "fixed"):
        set_variant(variant)
        for name, make in makers.items():
            for op, arg in SYNC_OPS:
                cache = make()
                for layer_idx in range(8):
                    cache.update(states, states, layer_idx)
                counts[(name, op, variant)] = count_syncs(cache.crop, torch.tensor(arg) if "tensor" in op else arg)
    cache_crop_fix.apply()
    return counts


SYNC_OPS = [("crop(0)", 0), ("crop(-1)", -1), ("crop(-L-1)", -11), ("crop(tensor(-1))", -1)]


def measure_compile_frames() -> dict[tuple[str, str, str], int]:
    """Frames torch.compile makes for 12 decode steps of a tiny hybrid model (`tests/test_compile.py`'s run, a counting
    backend), stock and fixed: a cache that moved a host counter in its update path recompiled every step."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.test_compile import _compiled_frames
    from tests.tiny_models import tiny_qwen3_next

    model, frames = tiny_qwen3_next(), {}
    for variant in ("stock", "fixed"):
        set_variant(variant)
        for kind in ("static", "dynamic"):
            for record in (False, True):
                if record and kind == "static" and TARGET.name == "v5_14":
                    continue  # 5.14 static caches cannot record their past
                frames[(kind, "recording" if record else "plain", variant)] = _compiled_frames(model, kind, record)
    cache_crop_fix.apply()
    return frames


# ----------------------------------------------------------------------------------------------------------------
# Where the fixed path spends its time (each piece timed alone, with the fix applied)
# ----------------------------------------------------------------------------------------------------------------


def call_counts(group: Group, arg: int) -> Counter:
    """The Python functions (and C functions called by name) that one `Cache.crop(arg)` runs, with call counts."""
    counts = Counter()

    def hook(frame, event, called):
        if event == "call":
            counts[frame.f_code.co_qualname] += 1
        elif event == "c_call" and called is not sys.setprofile:
            counts[f"{getattr(called, '__qualname__', called)} (C)"] += 1

    group.restore()
    cache = group.caches[0]
    sys.setprofile(hook)
    try:
        cache.crop(arg)
    finally:
        sys.setprofile(None)
    return counts


def measure_breakdown(sizes: Sizes) -> dict:
    """Which calls a crop makes (stock and fixed, per call and per layer), and what the fixed ones cost alone."""
    calls = {}
    for variant in ("stock", "fixed"):
        set_variant(variant)
        one, two = (call_counts(Group("dynamic", layers, 16, 1, sizes, {}), -4) for layers in (1, 2))
        for name in one | two:
            per_layer = two[name] - one[name]
            calls[(variant, name)] = (one[name] - per_layer, per_layer)
    names = sorted({name for _, name in calls}, key=lambda name: (-calls.get(("fixed", name), (0, 0))[1], name))
    call_rows = [(name, *calls.get(("stock", name), (0, 0)), *calls.get(("fixed", name), (0, 0))) for name in names]

    cache_crop_fix.apply()
    seq = sizes.seq_lengths[-1]
    group = Group("dynamic", 1, seq, 1, sizes, {})
    sliding = Group("sliding", 1, min(sizes.sliding_seq_lengths), 1, sizes, {})
    namespace = {
        "layer": group.caches[0].layers[0],
        "sliding_layer": sliding.caches[0].layers[0],
        "cache": group.caches[0],
        "keys": group.keys,
        "cu": cache_utils,
        "n": seq - 4,
        "seq": seq,
    }
    pieces = [
        ("per call", "`_check_crop_argument(-4, None)`", "cu._check_crop_argument(-4, None)"),
        ("per call", "`operator.index(-4)` (inside the above)", "cu.operator.index(-4)"),
        ("per call", "`Cache._get_crop_seq_length()`", "cache._get_crop_seq_length()"),
        ("per layer", "`DynamicLayer._check_crop(-4)`", "layer._check_crop(-4)"),
        ("per layer", "`DynamicSlidingWindowLayer._check_crop(-4)`", "sliding_layer._check_crop(-4)"),
        ("per layer", "`DynamicLayer.get_seq_length()`", "layer.get_seq_length()"),
        ("per layer", "`_get_crop_length(-4, seq)`", "cu._get_crop_length(-4, seq)"),
        ("per layer", "one view slice `keys[..., :n, :]`", "keys[..., :n, :]"),
        ("per layer", "the same slice with `keys.narrow(-2, 0, n)`", "keys.narrow(-2, 0, n)"),
    ]
    # Many short repeats, the fastest kept: on a shared machine some of them run undisturbed
    number, repeat = (1000, 40) if sizes is FULL else (100, 3)
    piece_rows = []
    for scope, label, statement in pieces:
        try:
            seconds = min(timeit.repeat(statement, globals=namespace, number=number, repeat=repeat))
        except (AttributeError, NameError):
            continue  # the overlay changed: that piece no longer exists
        piece_rows.append((scope, label, seconds / number * 1e9))
    return {"calls": call_rows, "pieces": piece_rows}


# ----------------------------------------------------------------------------------------------------------------
# Zero-copy
# ----------------------------------------------------------------------------------------------------------------


def storage_pointers(cache: Cache) -> list[tuple[int, int, int]]:
    return [
        (
            layer.keys.untyped_storage().data_ptr(),
            layer.values.untyped_storage().data_ptr(),
            layer.keys.untyped_storage().nbytes() + layer.values.untyped_storage().nbytes(),
        )
        for layer in cache.layers
    ]


@contextlib.contextmanager
def quiet_stderr():
    """Hides what the profiler's C++ side prints on file descriptor 2."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def measure_zero_copy(sizes: Sizes, tensors: dict) -> list[dict]:
    rows = []
    cases = [
        ("dynamic", max(sizes.layer_counts), max(sizes.seq_lengths), -4),
        ("dynamic", max(sizes.layer_counts), max(sizes.seq_lengths), -(max(sizes.seq_lengths) + 1)),
        ("sliding", sizes.sliding_layers, max(sizes.sliding_seq_lengths), -4),
        ("hybrid", sizes.hybrid_layers, max(sizes.hybrid_seq_lengths), -4),
    ]
    for variant in ("stock", "fixed"):
        set_variant(variant)
        for kind, layers, seq, arg in cases:
            group = Group(kind, layers, seq, 1, sizes, tensors)
            cache = group.caches[0]
            before = storage_pointers(cache)
            with quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                cache.crop(arg)
            allocated = sum(max(event.cpu_memory_usage, 0) for event in prof.events())
            after = storage_pointers(cache)
            same_storage = all(b[:2] == a[:2] for b, a in zip(before, after))
            # RSS over many crops: any copy of a layer's states would show as at least a page per crop
            cycles = 200
            gc.collect()
            rss_before = rss_bytes()
            for _ in range(cycles):
                group.restore()
                cache.crop(arg)
            gc.collect()
            rss_growth = rss_bytes() - rss_before
            logical = layers * seq * NUM_HEADS * HEAD_DIM * DTYPE.itemsize * 2
            rows.append(
                {
                    "variant": variant,
                    "kind": kind,
                    "layers": layers,
                    "seq": seq,
                    "op": "crop(-4)" if arg == -4 else "crop(-L-1)",
                    "same_storage": same_storage,
                    "allocated": allocated,
                    "rss_growth": rss_growth,
                    "cycles": cycles,
                    "logical": logical,
                    "kept": cache.layers[0].keys.shape[-2],
                }
            )
    cache_crop_fix.apply()
    return rows


# ----------------------------------------------------------------------------------------------------------------
# End to end: assisted decoding and prompt lookup decoding with tiny random Llamas
# ----------------------------------------------------------------------------------------------------------------


def build_models() -> tuple[LlamaForCausalLM, LlamaForCausalLM]:
    torch.manual_seed(0)
    common = {"vocab_size": 512, "max_position_embeddings": 1024, "bos_token_id": 1, "eos_token_id": None}
    main_config = LlamaConfig(
        hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4, **common
    )
    assistant_config = LlamaConfig(
        hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2, **common
    )
    model = LlamaForCausalLM(main_config).eval()
    assistant = LlamaForCausalLM(assistant_config).eval()
    for config in (model.generation_config, assistant.generation_config):
        config.pad_token_id = 0
        config.eos_token_id = None
    # 5-token drafts every step: constant schedule, and no confidence cut-off (a random assistant is never confident)
    assistant.generation_config.num_assistant_tokens = 5
    assistant.generation_config.num_assistant_tokens_schedule = "constant"
    assistant.generation_config.assistant_confidence_threshold = 0.0
    return model, assistant


def make_prompts(count: int) -> list[torch.Tensor]:
    """Prompts of 32 tokens: an 8-token phrase said four times, so that prompt lookup finds n-gram matches."""
    generator = torch.Generator().manual_seed(1)
    return [torch.randint(3, 512, (1, 8), generator=generator).repeat(1, 4) for _ in range(count)]


E2E_METHODS = ("assisted", "prompt_lookup", "greedy")


def generate(model, assistant, prompt: torch.Tensor, method: str, new_tokens: int) -> torch.Tensor:
    kwargs = {"max_new_tokens": new_tokens, "do_sample": False}
    if method == "assisted":
        kwargs["assistant_model"] = assistant
    elif method == "prompt_lookup":
        kwargs["prompt_lookup_num_tokens"] = 5
    # else "greedy": plain decoding, which never crops (the control)
    with torch.inference_mode():
        return model.generate(prompt, attention_mask=torch.ones_like(prompt), **kwargs)


def count_crops(model, assistant, prompt: torch.Tensor, method: str, new_tokens: int) -> tuple[int, int]:
    """(Cache.crop calls, layer crops) in one generation, counted with a profile hook (untimed run)."""
    counts = [0, 0]

    def hook(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "crop":
            owner = frame.f_locals.get("self")
            if isinstance(owner, Cache):
                counts[0] += 1
            elif owner is not None and hasattr(owner, "keys"):
                counts[1] += 1

    sys.setprofile(hook)
    try:
        generate(model, assistant, prompt, method, new_tokens)
    finally:
        sys.setprofile(None)
    return counts[0], counts[1]


def measure_e2e(sizes: Sizes, log) -> dict:
    model, assistant = build_models()
    prompts = make_prompts(sizes.e2e_prompts)
    throughput = defaultdict(list)  # (method, variant) -> new tokens per CPU second, one per run and prompt
    wall_throughput = defaultdict(list)  # the same per wall-clock second
    outputs = {}
    crops = {}
    for method in E2E_METHODS:
        for variant in ("stock", "fixed"):  # warm-up, and the outputs to compare
            set_variant(variant)
            outputs[(method, variant)] = [generate(model, assistant, p, method, sizes.e2e_new_tokens) for p in prompts]
        crops[method] = count_crops(model, assistant, prompts[0], method, sizes.e2e_new_tokens)
    section_start = time.perf_counter()
    for run in range(sizes.e2e_runs):
        if run >= sizes.min_runs and time.perf_counter() - section_start > sizes.e2e_budget:
            break
        start = time.perf_counter()
        # Stock and fixed back to back on each prompt, in the order ABBA or BAAB (alternately), so that each pair
        # shares the machine's load of the moment and a load that rises or falls during the pair cancels out
        for prompt_idx, prompt in enumerate(prompts):
            for method_idx, method in enumerate(E2E_METHODS):
                first, second = rotated(("stock", "fixed"), run + prompt_idx + method_idx)
                cpu_seconds, seconds = defaultdict(list), defaultdict(list)
                for variant in (first, second, second, first):
                    set_variant(variant)
                    gc.collect()
                    tic, cpu_tic = time.perf_counter(), time.process_time()
                    generate(model, assistant, prompt, method, sizes.e2e_new_tokens)
                    cpu_seconds[variant].append(time.process_time() - cpu_tic)
                    seconds[variant].append(time.perf_counter() - tic)
                # The faster of its two runs, for each variant: load only ever adds time
                for variant in ("stock", "fixed"):
                    throughput[(method, variant)].append(sizes.e2e_new_tokens / min(cpu_seconds[variant]))
                    wall_throughput[(method, variant)].append(sizes.e2e_new_tokens / min(seconds[variant]))
        log(f"  e2e run {run + 1}/{sizes.e2e_runs}: {time.perf_counter() - start:.1f} s")
    cache_crop_fix.apply()
    same = {
        method: all(torch.equal(a, b) for a, b in zip(outputs[(method, "stock")], outputs[(method, "fixed")]))
        for method in E2E_METHODS
    }
    return {"throughput": throughput, "wall_throughput": wall_throughput, "same_output": same, "crops": crops}


# ----------------------------------------------------------------------------------------------------------------
# Import cost (whole processes)
# ----------------------------------------------------------------------------------------------------------------

IMPORTS = {
    "python -c pass": "pass",
    "import transformers.cache_utils": "import transformers.cache_utils",
    "import cache_crop_fix": "import cache_crop_fix",
}


def measure_imports(sizes: Sizes, log) -> dict:
    seconds = defaultdict(list)  # label -> wall seconds
    cpu_seconds = defaultdict(list)  # label -> user + system CPU seconds of the child
    section_start = time.perf_counter()
    for round_idx in range(sizes.import_rounds):
        if round_idx >= sizes.min_runs and time.perf_counter() - section_start > sizes.section_budget:
            break
        for label in rotated(tuple(IMPORTS), round_idx):
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            tic = time.perf_counter()
            subprocess.run([sys.executable, "-c", IMPORTS[label]], check=True, capture_output=True)
            seconds[label].append(time.perf_counter() - tic)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu_seconds[label].append(after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime)
        log(f"  import round {round_idx + 1}/{sizes.import_rounds}")
    # And in this process: installing and removing the fix
    number = 200 if sizes is FULL else 10
    cycle = min(timeit.repeat("revert(); apply()", globals=vars(cache_crop_fix), number=number, repeat=5)) / number
    cache_crop_fix.apply()
    return {"seconds": seconds, "cpu_seconds": cpu_seconds, "cycle": cycle}


# ----------------------------------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def latency_rows(samples: dict, syncs: dict, kind: str, layers: int, seq: int, ops: list[str]) -> list[str]:
    rows = []
    for op in ops:
        stock, fixed, floor = (samples[(kind, layers, seq, op, v)] for v in VARIANTS)
        if not fixed:
            continue
        per_layer = [value / layers for value in fixed]
        stock_syncs, fixed_syncs = (syncs.get((kind, layers, seq, op, v), "–") for v in ("stock", "fixed"))
        rows.append(
            f"| {kind} | {layers} | {seq} | `{op}` | {fmt(stock)} | {fmt(fixed)} | {stock_syncs} | {fixed_syncs} | "
            f"{fmt(floor)} | "
            f"{fmt(per_layer, 2)} | {fmt(paired_ratios(fixed, stock), 3)} | {fmt(paired_ratios(fixed, floor), 3)} | "
            f"{fmt(paired_ratios(stock, floor), 3)} |"
        )
    return rows


LATENCY_HEADER = [
    "| cache | layers | tokens | op | stock µs/call | fixed µs/call | stock syncs/call | fixed syncs/call "
    "| floor µs/call | fixed µs/layer | fixed/stock | fixed/floor | stock/floor |",
    "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
]


def write_plot(latency: dict, sizes: Sizes, path: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed, so the plot was not drawn"
    samples = latency["samples"]
    op = "crop(-4)"
    colors = {"stock": "tab:red", "fixed": "tab:blue", "floor": "tab:gray"}
    # Stock and fixed often overlap: stock is drawn wide and translucent, under fixed
    styles = {
        "stock": {"linestyle": "-", "linewidth": 4, "alpha": 0.45},
        "fixed": {"linestyle": "-", "linewidth": 1.5},
        "floor": {"linestyle": "--", "linewidth": 1.5},
    }
    markers = dict(zip(sizes.layer_counts, "osD^v"))
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    for variant in VARIANTS:
        for layers in sizes.layer_counts:
            stats = [quartiles(samples[("dynamic", layers, seq, op, variant)]) for seq in sizes.seq_lengths]
            left.errorbar(
                sizes.seq_lengths,
                [s[1] for s in stats],
                yerr=[[s[1] - s[0] for s in stats], [s[2] - s[1] for s in stats]],
                color=colors[variant],
                marker=markers[layers],
                capsize=3,
                **styles[variant],
                label=f"{variant}, {layers} layer{'s' if layers > 1 else ''}",
            )
        seq = sizes.seq_lengths[-1]
        stats = [quartiles(samples[("dynamic", layers, seq, op, variant)]) for layers in sizes.layer_counts]
        right.errorbar(
            sizes.layer_counts,
            [s[1] for s in stats],
            yerr=[[s[1] - s[0] for s in stats], [s[2] - s[1] for s in stats]],
            color=colors[variant],
            marker="o",
            capsize=3,
            **styles[variant],
            label=variant,
        )
    left.set(xscale="log", yscale="log", xlabel="cached tokens", ylabel="µs per Cache.crop call")
    left.set_title(f"DynamicCache.{op} vs sequence length (flat = O(1))")
    left.legend(fontsize=7, ncol=3)
    right.set(xlabel="layers", ylabel="µs per Cache.crop call")
    right.set_title(f"DynamicCache.{op} vs layer count ({sizes.seq_lengths[-1]} tokens)")
    right.legend()
    for axis in (left, right):
        axis.grid(True, which="both", alpha=0.3)
    fig.suptitle("Cache.crop latency: stock vs fixed vs floor (two view slices per layer); median, bars = IQR")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def write_report(args, sizes: Sizes, latency, breakdown, zero_copy, e2e, imports, runtime, plot_note, out) -> None:
    samples, results, syncs = latency["samples"], latency["results"], latency["syncs"]
    slice_ns = next((ns for _, label, ns in breakdown["pieces"] if label.startswith("one view slice")), float("nan"))
    partial_ops = ["crop(-1)", "crop(-4)", "crop(-L-1)"]
    mid_layers = 32 if 32 in sizes.layer_counts else sizes.layer_counts[-1]
    first_seq, last_seq = sizes.seq_lengths[0], sizes.seq_lengths[-1]

    # Targets
    target_keys = [(mid_layers, seq, op) for seq in sizes.seq_lengths for op in partial_ops]
    stock_ratio = max(
        median(paired_ratios(samples[("dynamic", L, S, op, "fixed")], samples[("dynamic", L, S, op, "stock")]))
        for L, S, op in target_keys
    )
    floor_ratio, stock_floor_ratio = (
        max(
            median(paired_ratios(samples[("dynamic", L, S, op, variant)], samples[("dynamic", L, S, op, "floor")]))
            for L, S, op in target_keys
        )
        for variant in ("fixed", "stock")
    )
    scaling = {
        (layers, op): paired_ratios(
            samples[("dynamic", layers, last_seq, op, "fixed")], samples[("dynamic", layers, first_seq, op, "fixed")]
        )
        for layers in sizes.layer_counts
        for op in partial_ops
    }
    worst_scaling = max(median(values) for values in scaling.values())
    fixed_zero_copy = [row for row in zero_copy if row["variant"] == "fixed"]
    zero_copy_ok = all(row["same_storage"] and row["allocated"] == 0 for row in fixed_zero_copy)
    throughput = e2e["throughput"]
    e2e_ratios = {
        method: paired_ratios(throughput[(method, "fixed")], throughput[(method, "stock")]) for method in E2E_METHODS
    }
    worst_e2e = min(median(e2e_ratios[method]) for method in ("assisted", "prompt_lookup"))
    # Issue 21: per call no slower than stock, and no host sync for `crop(0)` (at most one per rollback)
    per_call_seq = 4096 if 4096 in sizes.seq_lengths else last_seq
    per_call_keys = [
        (layers, op) for layers in (1, 32) if layers in sizes.layer_counts for op in ("crop(0)", "crop(-1)")
    ]
    per_call_keys = per_call_keys or [(sizes.layer_counts[0], op) for op in ("crop(0)", "crop(-1)")]
    per_call = {
        (layers, op): median(
            paired_ratios(
                samples[("dynamic", layers, per_call_seq, op, "fixed")],
                samples[("dynamic", layers, per_call_seq, op, "stock")],
            )
        )
        for layers, op in per_call_keys
    }
    sync_table = latency["sync_table"]
    fixed_syncs = {key: count for key, count in sync_table.items() if key[2] == "fixed"}
    zero_syncs_ok = all(count == 0 for (_, op, _), count in fixed_syncs.items() if op == "crop(0)")
    one_sync_ok = all(isinstance(count, int) and count <= 1 for count in fixed_syncs.values())

    v5_14 = TARGET.name == "v5_14"
    lines = []
    if args.quick:
        lines += [
            "> **Quick run** (`--quick`): tiny sizes and few rounds, to check that the benchmark works. The figures "
            "below mean nothing; run `make bench` for real ones.",
            "",
        ]
    lines += [
        "## Targets",
        "",
        "| target (issue 5) | measured | |",
        "|---|---|---|",
        f"| fixed/stock per-call ratio ≤ 1.10 at {mid_layers} layers (worst median over tokens and partial ops) "
        f"| {stock_ratio:.3f} | {verdict(stock_ratio <= 1.10)} |",
        f"| fixed ≤ 1.2 × the two-slice floor at {mid_layers} layers (worst median) | {floor_ratio:.3f} (stock: "
        f"{stock_floor_ratio:.3f}) | {verdict(floor_ratio <= 1.2)} |",
        f"| fixed time at {last_seq} / at {first_seq} tokens ≤ 1.5 (worst median over layers and ops) "
        f"| {worst_scaling:.3f} | {verdict(worst_scaling <= 1.5)} |",
        f"| zero KV bytes copied by a crop of a dynamic layer | "
        f"{'same storage, 0 B allocated' if zero_copy_ok else 'copies seen'} | {verdict(zero_copy_ok)} |",
        f"| assisted and prompt-lookup decoding throughput fixed/stock ≥ 0.98 (worst median) | {worst_e2e:.3f} "
        f"| {verdict(worst_e2e >= 0.98)} |",
        *[
            f"| fixed/stock per-call ratio ≤ 1.00, `{op}`, {layers} layer(s), {per_call_seq} tokens (issue 21) "
            f"| {ratio:.3f} | {verdict(ratio <= 1.00)} |"
            for (layers, op), ratio in per_call.items()
        ],
        f"| fixed `crop(0)` makes no host sync, on every cache of *Host syncs* (issue 21) "
        f"| {'none' if zero_syncs_ok else 'syncs seen'} | {verdict(zero_syncs_ok)} |",
        f"| fixed rollbacks make at most one host sync per call (issue 21) "
        f"| {'at most one' if one_sync_ok else 'more seen'} | {verdict(one_sync_ok)} |",
        "",
        "The per-call and floor ratios are over `crop(-1)`, `crop(-4)` and `crop(-L-1)` at every sequence length. "
        "*Where the fixed path spends its time* below shows what the fixed path does beyond the floor.",
        "",
        "## How to run",
        "",
        "```bash",
        "make bench                                   # every target, each in its venv (.venv, .venv-v5_24, .venv-v5_25)",
        f"{VENVS[TARGET.name]}/bin/python benchmarks/bench_crop.py --quick --out-dir /tmp/bench   # tiny sizes "
        "(the smoke test)",
        "```",
        "",
        f"This run: `{' '.join([interpreter(), 'benchmarks/bench_crop.py', *args.argv])}`, {runtime:.0f} s in all. "
        f"Python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}, "
        f"cache_crop_fix {cache_crop_fix.__version__}, {cpu_name()}, {os.cpu_count()} logical CPUs, "
        f"`torch.set_num_threads({torch.get_num_threads()})`.",
        "",
        "## Method",
        "",
        "- **One process, interleaved.** Stock is `cache_crop_fix.revert()`, fixed is `cache_crop_fix.apply()`, "
        "both on the same cache objects. Each round measures every configuration once per variant (stock, fixed, "
        "floor), in an order rotated from one configuration and round to the next; after each switch a few untimed "
        "crops of a small cache of the same kind re-warm the interpreter's specialised call sites. "
        f"{sizes.rounds} rounds. Each cell is the median over rounds, with the interquartile range in brackets; "
        "ratios are computed per round (the two figures of a round share its noise), then summarised the same way.",
        "- **A timed batch** crops several identical caches once each (`for cache in caches: cache.crop(n)` "
        f"between two `perf_counter_ns()` calls; about {sizes.layer_crops_per_batch} layer crops, at least "
        f"{sizes.min_caches} caches), with the garbage collector off, and gives the mean µs per `Cache.crop` call: "
        "this keeps the timer's own cost out of a 2 µs call. Per round and variant, "
        f"{sizes.batches} such short batches run and the round keeps the fastest. The machine is shared: a batch "
        "that the scheduler interrupted measures the other processes, not `crop`; short batches are rarely hit, "
        "and the fastest of a few is not.",
        "- **Restoring the caches.** A crop replaces each layer's `keys` / `values` with views; it never copies. "
        "So all layers of all caches of one sequence length share one key and one value tensor (an 80-layer, 32k "
        "cache addresses 20 GiB, more than this machine has, but allocates 256 MiB), and each cache is restored before a batch by reassigning "
        "the saved references (and `cumulative_length` / the conv state for sliding and hybrid layers), outside "
        "the timer. We do not time crop+restore and subtract a restore-only baseline: that difference of two noisy "
        "figures is noisier than the crop itself.",
        "- **The floor** is what a crop cannot avoid: per layer, `layer.keys = layer.keys[..., :n, :]` and the "
        "same for `values`, with `n` precomputed, in the same loop over caches and layers (for hybrid layers also "
        "the conv-state slice that both versions do). The floor times use the fixed target length.",
        "- **Caches**: batch 1, 8 KV heads, head dim 128, float32. `DynamicCache()` layers are created by "
        "`cache.update` and then pointed at the shared tensors. The sliding-window cache is "
        f"`DynamicCache(config=MistralConfig(sliding_window={sizes.sliding_window}))`, cropped *below* its window "
        "(past the window the fix refuses partial crops, and stock refuses every crop). The hybrid cache has "
        f"`LinearAttentionAndFullAttentionLayer`s (`layer_types=['hybrid']`) after `activate_past_recording()`, "
        f"with a conv state of {sizes.conv_dim} channels × the cached tokens (kernel {sizes.conv_kernel}).",
        (
            "- **`crop(0)`** is deprecated in the fix and emits a `FutureWarning` per call: the benchmark sets "
            "`warnings.filterwarnings('ignore', category=FutureWarning)` once, outside the timed loop, so the fixed "
            "figure still includes the `warnings.warn` call (filter matching, no output). Stock `crop(0)` is the bug: "
            "it keeps every token and does no tensor work, so it is reported separately. The fix puts the layers of a "
            "`DynamicCache` back as they were built (no tensor work either), so at 1 layer the warning is most of "
            "its cost: `warnings.warn` (~0.4 µs, with the warning object built once rather than per call) against "
            "stock's whole call (~0.7 µs). `generate` never calls `crop(0)` on 5.14."
            if v5_14
            else "- **`crop(0)`** removes nothing on 5.24, stock and fixed (`generate` calls it after every forward, "
            "to drop recorded states that the next forward does not need): it is reported separately, as it does "
            "no tensor work on these caches."
        ),
        "",
        "## Per-call latency",
        "",
        "`crop(-L-1)` removes one more token than the cache holds (L = tokens); *What each crop left* below shows "
        "what stock and fixed keep.",
        "",
        "### `DynamicCache`",
        "",
        *LATENCY_HEADER,
    ]
    for layers in sizes.layer_counts:
        for seq in sizes.seq_lengths:
            lines += latency_rows(samples, syncs, "dynamic", layers, seq, partial_ops)
    zero_heading = (
        "fixed: empties the cache and warns; stock: keeps everything" if v5_14 else "removes nothing, in both"
    )
    lines += ["", f"### `crop(0)` ({zero_heading})", "", *LATENCY_HEADER]
    for layers in sizes.layer_counts:
        for seq in sizes.seq_lengths:
            lines += latency_rows(samples, syncs, "dynamic", layers, seq, ["crop(0)"])
    lines += ["", "### Sliding-window and hybrid caches", "", *LATENCY_HEADER]
    for seq in sizes.sliding_seq_lengths:
        lines += latency_rows(samples, syncs, "sliding", sizes.sliding_layers, seq, [*partial_ops, "crop(0)"])
    for seq in sizes.hybrid_seq_lengths:
        lines += latency_rows(samples, syncs, "hybrid", sizes.hybrid_layers, seq, ["crop(-1)", "crop(-4)"])
    lines += [
        "",
        "Hybrid layers are timed for `crop(-1)` and `crop(-4)` only, the crops that both versions do. "
        + (
            "Stock cannot roll them back fully: its linear-attention part reads `crop(0)` as *remove nothing* (it "
            "only trims the conv state to the kernel) while the attention part keeps every token, and an oversized "
            "`crop(-L-1)` keeps L-1 tokens and leaves an empty conv state (width 0). "
            if v5_14
            else "Stock 5.24 does not roll them back fully: after a full rollback its linear-attention part still "
            "reports previous states (see the audit, `cache_crop_audit.md`). "
        )
        + "The table below shows what the fix does instead. The hybrid layers here hold conv states only: the fix "
        "refuses a partial crop of a layer with a recurrent state (it summarizes every past token and cannot be "
        "rolled back), which stock silently keeps.",
        "",
        "### What each crop left (first layer: tokens kept, stock / fixed)",
        "",
        "| cache | layers | tokens | " + " | ".join(f"`{op}`" for op in [*partial_ops, "crop(0)"]) + " |",
        "|---|---:|---:|" + "---|" * 4,
    ]
    seen = []
    for kind, layers, seq, _, _ in results:
        if (kind, layers, seq) not in seen:
            seen.append((kind, layers, seq))
    for kind, layers, seq in seen:
        cells = []
        for op in [*partial_ops, "crop(0)"]:
            stock = results.get((kind, layers, seq, op, "stock"))
            fixed = results.get((kind, layers, seq, op, "fixed"))
            cells.append("–" if stock is None else f"{stock} / {fixed}")
        lines.append(f"| {kind} | {layers} | {seq} | " + " | ".join(cells) + " |")

    lines += [
        "",
        "### Host syncs",
        "",
        "Host syncs per `Cache.crop` call (`aten._local_scalar_dense`, what `.item()`, `int(t)` and `bool(t)` "
        "dispatch to: on an accelerator each waits for the device), counted with a `TorchDispatchMode` around one "
        "untimed call; the *syncs/call* columns above are counted the same way. Caches of 8 layers holding 10 tokens "
        "(static: `max_cache_len=16`); `crop(tensor(-1))` passes a 0-d tensor, as `generate` does, which is read "
        "once. Stock / fixed:",
        "",
        "| cache | " + " | ".join(f"`{op}`" for op, _ in SYNC_OPS) + " |",
        "|---|" + "---|" * len(SYNC_OPS),
    ]
    for name in dict.fromkeys(name for name, _, _ in sync_table):
        cells = [f"{sync_table[(name, op, 'stock')]} / {sync_table[(name, op, 'fixed')]}" for op, _ in SYNC_OPS]
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    frames = latency["compile_frames"]
    lines += [
        "",
        "Frames torch.compile makes for 12 decode steps of a tiny Qwen3-Next (linear attention next to full "
        "attention), its forward compiled with a counting backend (`tests/test_compile.py`, which asserts they are "
        "equal); while recording, `crop(0)` after each step, as assisted decoding does. Stock / fixed:",
        "",
        "| cache | plain | recording |",
        "|---|---|---|",
    ]
    for kind in ("static", "dynamic"):
        cells = [
            f"{frames[(kind, mode, 'stock')]} / {frames[(kind, mode, 'fixed')]}"
            if (kind, mode, "stock") in frames
            else "n/a"
            for mode in ("plain", "recording")
        ]
        lines.append(f"| `{'StaticCache' if kind == 'static' else 'DynamicCache'}` | " + " | ".join(cells) + " |")
    lines += [
        "",
        "### Where the fixed path spends its time",
        "",
        "The calls one `Cache.crop(-4)` makes, counted with a `sys.setprofile` hook on 1- and 2-layer caches (per "
        "call = the 1-layer count minus the per-layer count). Tensor slicing goes through `__getitem__` and is not "
        "listed.",
        "",
        "| function | stock per call | stock per layer | fixed per call | fixed per layer |",
        "|---|---:|---:|---:|---:|",
        *[f"| `{name}` | {a} | {b} | {c} | {d} |" for name, a, b, c, d in breakdown["calls"]],
        "",
        "Each piece of the fixed path timed alone (`timeit`, fastest of many short repeats, on a 1-layer cache), "
        "also as a fraction of one view slice timed the same way (steadier than the ns on a loaded machine):",
        "",
        "| scope | piece | ns | × one slice |",
        "|---|---|---:|---:|",
        *[f"| {scope} | {label} | {ns:.0f} | {ns / slice_ns:.2f} |" for scope, label, ns in breakdown["pieces"]],
        "",
        "## Zero-copy",
        "",
        "A crop must only make views. Checked per layer: the storage pointer of `keys` and `values` "
        "(`untyped_storage().data_ptr()`) before and after; the bytes allocated during the crop according to "
        "`torch.profiler` (`profile_memory=True`, which sees torch's CPU allocator, unlike `tracemalloc`); and the "
        "process RSS (`/proc/self/statm`) across repeated crop/restore cycles.",
        "",
        "| variant | cache | layers | tokens | op | logical KV size | same storage | bytes allocated by the crop "
        "| RSS growth over cycles | kept |",
        "|---|---|---:|---:|---|---:|---|---:|---:|---:|",
    ]
    for row in zero_copy:
        lines.append(
            f"| {row['variant']} | {row['kind']} | {row['layers']} | {row['seq']} | `{row['op']}` | "
            f"{row['logical'] / 2**20:.0f} MiB | {'yes' if row['same_storage'] else '**no**'} | {row['allocated']} "
            f"| {row['rss_growth'] / 1024:.0f} KiB over {row['cycles']} | {row['kept']} |"
        )
    lines += [
        "",
        "## Scaling with sequence length",
        "",
        f"Fixed `Cache.crop` time at {last_seq} tokens divided by the time at {first_seq} tokens (per round, "
        "then median and IQR). 1.0 means O(1) in the sequence length.",
        "",
        "| layers | " + " | ".join(f"`{op}`" for op in partial_ops) + " |",
        "|---:|" + "---:|" * len(partial_ops),
    ]
    for layers in sizes.layer_counts:
        lines.append(f"| {layers} | " + " | ".join(fmt(scaling[(layers, op)], 3) for op in partial_ops) + " |")

    e2e_runs = len(throughput[("assisted", "fixed")]) // sizes.e2e_prompts
    wall = e2e["wall_throughput"]
    lines += [
        "",
        "## End to end",
        "",
        f"New tokens per second of `generate` with a random `LlamaForCausalLM` (4 layers, hidden 256, vocab 512), "
        f"greedy, {sizes.e2e_new_tokens} new tokens from each of {sizes.e2e_prompts} prompt(s) of 32 tokens (an "
        f"8-token phrase repeated, so that prompt lookup finds matches), {e2e_runs} run(s). In each run stock and "
        "fixed generate from each prompt back to back, twice each, in the order stock-fixed-fixed-stock or "
        "fixed-stock-stock-fixed (alternately, so that a load that rises or falls meanwhile cancels out); each "
        "variant keeps the faster of its two (load only adds time), each such group gives one fixed/stock ratio, "
        "and the table gives medians and IQRs over the groups. Plain greedy decoding, which never crops, is "
        "measured the same way as a control: its spread is the noise of the machine. Throughput is counted in CPU time of "
        "this process (`time.process_time()`; torch runs one thread), which the other processes of a shared "
        "machine do not inflate as they do wall-clock time; the wall-clock ratio is shown too. Assisted decoding uses a random "
        "2-layer assistant (hidden 128) with 5-token drafts (`num_assistant_tokens=5`, constant schedule, "
        "`assistant_confidence_threshold=0`); random models rarely agree, so nearly every step crops both caches, "
        "the worst case for the fix. Prompt lookup uses `prompt_lookup_num_tokens=5`. The prompts have 32 tokens "
        + (
            "because stock assisted decoding crashes on 1-token prompts (its `crop(0)` bug); with these, stock works."
            if v5_14
            else "(as for 5.14, where stock assisted decoding crashes on 1-token prompts)."
        ),
        "",
        "*crop overhead* is what the per-call latency above predicts: the crops of one `generate` times the fixed "
        "minus stock time per call and per layer, as a share of the time of one `generate`.",
        "",
        "| method | stock tokens/CPU-s | fixed tokens/CPU-s | fixed/stock | fixed/stock (wall clock) | same tokens "
        "as stock | crops per generate (`Cache.crop` calls / layer crops) | crop overhead |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    # The fix's extra time per `Cache.crop` call and per layer, from the latency table (crop(-4), shortest cache)
    one, many = sizes.layer_counts[0], sizes.layer_counts[-1]

    def latency(layers: int, variant: str) -> float:
        return median(samples[("dynamic", layers, first_seq, "crop(-4)", variant)])

    extra_per_layer = (
        (latency(many, "fixed") - latency(one, "fixed")) - (latency(many, "stock") - latency(one, "stock"))
    ) / max(many - one, 1)
    extra_per_call = latency(one, "fixed") - latency(one, "stock") - one * extra_per_layer
    labels = {"assisted": "assisted", "prompt_lookup": "prompt lookup", "greedy": "greedy (control, no crop)"}
    for method in E2E_METHODS:
        crops = e2e["crops"][method]
        extra_us = crops[0] * extra_per_call + crops[1] * extra_per_layer
        generate_us = sizes.e2e_new_tokens / median(throughput[(method, "stock")]) * 1e6
        lines.append(
            f"| {labels[method]} | {fmt(throughput[(method, 'stock')])} | "
            f"{fmt(throughput[(method, 'fixed')])} | {fmt(e2e_ratios[method], 3)} | "
            f"{fmt(paired_ratios(wall[(method, 'fixed')], wall[(method, 'stock')]), 3)} | "
            f"{'yes' if e2e['same_output'][method] else '**no**'} | {crops[0]} / {crops[1]} | "
            f"{extra_us:.0f} µs ({extra_us / generate_us:.3%}) |"
        )
    seconds, cpu_seconds = imports["seconds"], imports["cpu_seconds"]
    new, old = "import cache_crop_fix", "import transformers.cache_utils"
    lines += [
        "",
        "## Import cost",
        "",
        f"Whole-process time of `{Path(sys.executable).name} -c '<statement>'` run as a subprocess, "
        f"{len(seconds[new])} interleaved round(s): wall clock, and the child's user + system CPU time (from "
        "`getrusage(RUSAGE_CHILDREN)`, steadier on a shared machine); median and IQR. `import cache_crop_fix` also "
        "imports `transformers.generation.candidate_generator` (which it patches) and installs the fix.",
        "",
        "| statement | wall s | CPU s |",
        "|---|---:|---:|",
        *[f"| `{label}` | {fmt(seconds[label], 3)} | {fmt(cpu_seconds[label], 3)} |" for label in IMPORTS],
        f"| ratio `{new}` / `{old}` | {fmt(paired_ratios(seconds[new], seconds[old]), 3)} | "
        f"{fmt(paired_ratios(cpu_seconds[new], cpu_seconds[old]), 3)} |",
        "",
        f"In-process, `revert()` + `apply()` takes {imports['cycle'] * 1e6:.0f} µs.",
        "",
        "## Plot",
        "",
    ]
    if plot_note is None:
        lines += [
            f"![Cache.crop latency](crop_latency_{TARGET.name}.png)",
            "",
            "`crop(-4)` on `DynamicCache`: left, µs per call against cached tokens for each layer count (flat lines "
            "are O(1)); right, against the layer count at the longest sequence.",
        ]
    else:
        lines.append(f"({plot_note}.)")
    write_section(out / "benchmarks.md", lines)


PAGE_HEADER = [
    "<!-- Generated by benchmarks/bench_crop.py (`make bench`): edit the script, not this file. -->",
    "",
    "# Benchmarks: the cost of the `Cache.crop` fix",
    "",
    "`crop` runs on every assisted / speculative decoding step, once per layer, so the fix must not make it "
    "slower. This page compares the fixed `Cache.crop` (`cache_crop_fix.apply()`) with stock transformers "
    "(`cache_crop_fix.revert()`) and with the *floor*, the tensor work that any crop has to do. One section per "
    "target, each measured under that target's transformers (`make bench` runs every one in its venv: the `main` "
    "target, 5.25, in `.venv-v5_25`, the 5.24 backport in `.venv-v5_24`, the 5.14 backport in `.venv`).",
    "",
]


def section_markers(target: str) -> tuple[str, str]:
    return f"<!-- bench_crop {target}:start -->", f"<!-- bench_crop {target}:end -->"


def write_section(report: Path, body: list[str]) -> None:
    """Writes this target's section of `report` (headings one level down), keeping the other targets' sections and
    whatever follows them (e.g. `bench_assisted_history.py`'s section)."""
    start, end = section_markers(TARGET.name)
    title = f"## Target `{TARGET.name}`: the {TARGET.label} (transformers {transformers.__version__})"
    demoted = ["#" + line if line.startswith("#") else line for line in body]
    section = "\n".join([start, "", title, "", *demoted, "", end])
    text = report.read_text(encoding="utf-8") if report.exists() else ""
    sections = {}
    for target in SECTION_ORDER:
        target_start, target_end = section_markers(target)
        if target_start in text and target_end in text:
            sections[target] = target_start + text.split(target_start, 1)[1].split(target_end, 1)[0] + target_end
    sections[TARGET.name] = section
    # What follows the last target section stays; a page from before the target sections keeps only its other
    # scripts' sections (from their first marker on)
    # (this target's old section too: when it is the last one, what follows it is the tail, not the section itself)
    last_end = max(
        (text.rfind(section_markers(target)[1]) for target in SECTION_ORDER if section_markers(target)[1] in text),
        default=-1,
    )
    if last_end >= 0:
        tail = text[last_end:].split("\n", 1)[1] if "\n" in text[last_end:] else ""
    else:
        other = text.find("<!-- bench_")
        tail = text[other:] if other >= 0 else ""
    parts = ["\n".join(PAGE_HEADER)] + [sections[target] + "\n" for target in SECTION_ORDER if target in sections]
    page = "\n".join(parts)
    if tail.strip():
        page += "\n" + tail.lstrip("\n")
    report.write_text(page, encoding="utf-8")


def interpreter() -> str:
    """The Python that runs the benchmark, relative to the repository when it is the project's virtualenv."""
    path = Path(sys.executable)
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny sizes and few rounds (smoke test; seconds)")
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR, help="where to write the report and plot")
    parser.add_argument("--rounds", type=int, help="latency rounds (default: 15, or 3 with --quick)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: less noise)")
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    if TARGET is None:
        print(f"transformers {transformers.__version__} is not supported by cache_crop_fix", file=sys.stderr)
        return 2
    sizes = QUICK if args.quick else FULL
    if args.rounds:
        sizes = Sizes(**{**vars(sizes), "rounds": args.rounds})
    torch.set_num_threads(args.threads)
    args.out_dir.mkdir(parents=True, exist_ok=True)

    def log(message: str) -> None:
        print(message, flush=True)

    if not cache_crop_fix.is_active():
        cache_crop_fix.apply()  # raises on an unsupported transformers: there is nothing to compare then
    started = time.perf_counter()
    log("Cache.crop latency (stock / fixed / floor, interleaved)")
    latency = measure_latency(sizes, log)
    log("host syncs")
    latency["sync_table"] = measure_syncs()
    log("compiled hybrid decode")
    latency["compile_frames"] = measure_compile_frames()
    log("fixed path breakdown")
    breakdown = measure_breakdown(sizes)
    log("zero-copy")
    zero_copy = measure_zero_copy(sizes, latency["tensors"])
    latency.pop("tensors")
    gc.collect()
    log("end to end")
    e2e = measure_e2e(sizes, log)
    log("import cost")
    imports = measure_imports(sizes, log)
    plot_note = write_plot(latency, sizes, args.out_dir / f"crop_latency_{TARGET.name}.png")
    runtime = time.perf_counter() - started
    write_report(args, sizes, latency, breakdown, zero_copy, e2e, imports, runtime, plot_note, args.out_dir)
    log(f"wrote {args.out_dir / 'benchmarks.md'} in {runtime:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
