"""What the fix changes of stock's methods, measured (issue 42): the signature and decorators of every method it replaces,
and what each replaced `crop` does with the inputs outside its contract (positive, zero, bool, float, multi-element
tensor and numpy arguments; empty and filled layers; recording and not): the exception it raises, and the types of the
counters it leaves. `tests/test_stock_parity.py` compares them with the documented behaviour changes."""

from __future__ import annotations

import inspect
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

import cache_crop_fix
from cache_crop_fix.patcher import Patch, replacements


@dataclass(frozen=True)
class Layer:
    """A cache layer of the corpus: `build()` makes it (in a given state) under whichever `crop` is installed."""

    name: str  # e.g. "DynamicSlidingWindowLayer, 6 tokens, recording"
    build: Callable[[], object]


ARGUMENTS = {
    "3": lambda: 3,
    "0": lambda: 0,
    "-1": lambda: -1,
    "-100": lambda: -100,
    "True": lambda: True,
    "-1.0": lambda: -1.0,
    "tensor([-1, -1])": lambda: torch.tensor([-1, -1]),
    "tensor(-1)": lambda: torch.tensor(-1),
    "numpy.int64(-1)": lambda: np.int64(-1),
    "numpy.int64(2)": lambda: np.int64(2),
}


def _tokens(length: int) -> torch.Tensor:
    return torch.arange(1, length + 1, dtype=torch.float64).view(1, 1, length, 1)


def _attention(cls: type, length: int, record: bool, **kwargs) -> Callable[[], object]:
    def build():
        layer = cls(**kwargs)
        if record and hasattr(layer, "activate_past_recording"):  # stock's `StaticSlidingWindowLayer` has none
            layer.activate_past_recording()
        if length:
            # The positions a static layer writes at
            cache_kwargs = [{"cache_position": torch.arange(length)}] if "max_cache_len" in kwargs else []
            layer.update(_tokens(length), _tokens(length), *cache_kwargs)
        return layer

    return build


def _linear(cls: type, length: int, record: bool, states: int = 1) -> Callable[[], object]:
    def build():
        layer = cls()
        if record:
            kwargs = {"recurrent_states_to_keep": states} if states > 1 else {}
            layer.activate_past_recording(**kwargs)
        if length:
            layer.update_conv_state(torch.ones(1, 2, length, dtype=torch.float64), conv_kernel_size=2)
            recurrent = [torch.full((1, 2), float(i), dtype=torch.float64) for i in range(states)]
            layer.update_recurrent_state(recurrent if states > 1 else recurrent[0])
        return layer

    return build


def _takes(function: Callable, name: str) -> bool:
    return name in inspect.signature(function).parameters


def layers() -> Iterator[Layer]:
    """The corpus of layers, those of the installed release."""
    from transformers import cache_utils

    attention = {
        "DynamicLayer": {},
        "DynamicSlidingWindowLayer": {"sliding_window": 4},
        "StaticLayer": {"max_cache_len": 8},
        "StaticSlidingWindowLayer": {"max_cache_len": 4, "sliding_window": 4},
    }
    for name, kwargs in attention.items():
        cls = getattr(cache_utils, name, None)
        if cls is None:
            continue
        static = "max_cache_len" in kwargs
        if static and not _takes(cls.__init__, "max_cache_len"):
            continue
        for length, state in ((0, "empty"), (3, "3 tokens"), (6, "6 tokens")):
            if static and length > kwargs["max_cache_len"]:
                continue
            for record in (False, True) if hasattr(cls, "activate_past_recording") else (False,):
                label = f"{name}, {state}, {'recording' if record else 'not recording'}"
                yield Layer(label, _attention(cls, length, record, **kwargs))
    cls = getattr(cache_utils, "LinearAttentionLayer", None)
    if cls is not None:
        for length, state in ((0, "empty"), (3, "3 tokens")):
            for record in (False, True):
                label = f"LinearAttentionLayer, {state}, {'recording' if record else 'not recording'}"
                yield Layer(label, _linear(cls, length, record))
        if _takes(cls.activate_past_recording, "recurrent_states_to_keep"):
            # 5.25: the states after each of the last 2 tokens handed over, so that a crop can restore one
            yield Layer("LinearAttentionLayer, 3 tokens, recording 2 states", _linear(cls, 3, True, states=2))


def _counter_types(layer: object) -> dict[str, str]:
    """The types of a layer's counters (ints, numpy and 0-d tensors among its attributes)."""
    found = {}
    for name, value in sorted(vars(layer).items()):
        if isinstance(value, (bool, int, np.generic)) or (isinstance(value, torch.Tensor) and value.dim() == 0):
            found[name] = type(value).__name__
    return found


def crop_outcome(layer: Layer, argument: str) -> str:
    """What `crop(argument)` does to a fresh `layer`, under whichever `crop` is installed: the exception type, or "ok"
    with the counter types it leaves when they differ from those before."""
    built = layer.build()
    before = _counter_types(built)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            built.crop(ARGUMENTS[argument]())
        except Exception as error:  # the exception type is what is compared
            return type(error).__name__
    after = _counter_types(built)
    changed = {name: kind for name, kind in after.items() if before.get(name) != kind}
    return "ok" + "".join(f", {name}: {kind}" for name, kind in changed.items())


def crop_differences() -> dict[tuple[str, str], tuple[str, str]]:
    """(layer, argument) -> (stock outcome, fixed outcome), where they differ."""
    was_active = cache_crop_fix.is_active()
    corpus = list(layers())
    outcomes = {}
    try:
        for fixed in (False, True):
            cache_crop_fix.apply() if fixed else cache_crop_fix.revert()
            for layer in corpus:
                for argument in ARGUMENTS:
                    outcomes[fixed, layer.name, argument] = crop_outcome(layer, argument)
    finally:
        cache_crop_fix.apply() if was_active else cache_crop_fix.revert()
    return {
        (layer.name, argument): (outcomes[False, layer.name, argument], outcomes[True, layer.name, argument])
        for layer in corpus
        for argument in ARGUMENTS
        if outcomes[False, layer.name, argument] != outcomes[True, layer.name, argument]
    }


def decorator_chain(value: object) -> list[str]:
    """The kind of a method (function, static/class method, property) and its decorators, outermost first, each by the
    code of its wrapper and the plain values of its closure (e.g. `deprecate_kwarg`'s names and version)."""
    if isinstance(value, property):
        return ["property", *decorator_chain(value.fget)]
    if isinstance(value, (staticmethod, classmethod)):
        return [type(value).__name__, *decorator_chain(value.__func__)]
    chain = []
    while isinstance(value, types.FunctionType) and hasattr(value, "__wrapped__"):
        code = value.__code__
        contents = [_contents(cell) for cell in value.__closure__ or ()]
        constants = [repr(item) for item in contents if isinstance(item, (str, int, float, bool, type(None)))]
        chain.append(f"{code.co_filename.rpartition('site-packages/')[2]}:{code.co_qualname}({', '.join(constants)})")
        value = value.__wrapped__
    return chain


def _contents(cell: types.CellType) -> object:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def signature(value: object) -> list[tuple[str, str, str]]:
    """A method's parameters: name, kind and default (annotations are left out: the overlay's are strings)."""
    function = value.fget if isinstance(value, property) else value
    if isinstance(function, (staticmethod, classmethod)):
        function = function.__func__
    return [
        (parameter.name, parameter.kind.name, repr(parameter.default))
        for parameter in inspect.signature(function).parameters.values()
    ]


def replaced_methods() -> list[Patch]:
    """The methods and functions the fix replaces (not the code swaps of module functions: their function objects, and
    so their decorators and signatures, stay upstream's; their code is checked by `code_signature`)."""
    return [patch for patch in replacements() if isinstance(patch.owner, type)]


def code_signature(code: types.CodeType) -> tuple:
    return (code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_varnames[: code.co_argcount])
