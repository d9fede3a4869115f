"""Tests of `cache_crop_fix.patcher`: `apply()` / `revert()` / `status()` on the real transformers classes.

The in-process tests change the session's state (the fix is applied for the session, or reverted with `--stock`): the
`restore_fix_state` fixture puts it back whatever happens. What can only be seen in a fresh interpreter (the pristine
classes before `cache_crop_fix` is imported, the version guard, the seed reproduction, the command line) runs in
subprocesses, started together once per module to keep the file fast.
"""

import ast
import dataclasses
import importlib.metadata
import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
import types
import warnings
from pathlib import Path

import pytest
import torch
from packaging.requirements import Requirement

import cache_crop_fix
import transformers
from cache_crop_fix import patcher
from cache_crop_fix.__main__ import main as cli_main
from cache_crop_fix.targets import supported_ranges, target_for
from cache_crop_fix.targets.v5_14 import FINGERPRINTS as UPSTREAM_FINGERPRINTS
from transformers import DynamicCache
from transformers import cache_utils as upstream_cache_utils
from transformers.cache_utils import (
    Cache,
    DynamicIndexedLayer,
    DynamicLayer,
    DynamicSlidingWindowLayer,
    LinearAttentionAndSlidingWindowAttentionLayer,
)
from transformers.generation import candidate_generator as upstream_candidate_generator


REPO_ROOT = Path(__file__).resolve().parents[1]
TRANSFORMERS_DIR = Path(transformers.__file__).resolve().parent
PI0_MODULE = "transformers.models.pi0.modeling_pi0"
PI0_SAMPLE_ACTIONS = f"{PI0_MODULE}.PI0ForConditionalGeneration.sample_actions"
UPDATE_PAST_AND_MASKS = "transformers.generation.candidate_generator.AssistedCandidateGenerator._update_past_and_masks"

# Attributes the fix must install (a subset: the overlay may grow)
EXPECTED_PATCHES = {
    "transformers.cache_utils._check_crop_argument",
    "transformers.cache_utils.CacheLayerMixin._check_crop",
    "transformers.cache_utils.DynamicLayer._check_crop",
    "transformers.cache_utils.DynamicLayer.crop",
    "transformers.cache_utils.DynamicSlidingWindowLayer.crop",
    "transformers.cache_utils.DynamicIndexedLayer.crop",
    "transformers.cache_utils.Cache.crop",
    "transformers.cache_utils.Cache._crop",
    "transformers.cache_utils.EncoderDecoderCache.crop",
    UPDATE_PAST_AND_MASKS,
}


@pytest.fixture
def restore_fix_state():
    """Whatever a test does with `apply()` / `revert()`, the session's state is restored afterwards."""
    was_active = cache_crop_fix.is_active()
    try:
        yield
    finally:
        if was_active:
            cache_crop_fix.apply()
        else:
            cache_crop_fix.revert()


def _resolve(qualname):
    """`transformers.cache_utils.DynamicLayer.crop` -> (`DynamicLayer`, "crop"); module attributes -> (module, name)."""
    parts = qualname.split(".")
    for split in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:split]))
        if module is not None:
            owner = module
            for part in parts[split:-1]:
                owner = vars(owner)[part]
            return owner, parts[-1]
    raise LookupError(qualname)


def _applied_patches():
    """The qualnames the fix installs (applies it: use with `restore_fix_state`)."""
    cache_crop_fix.apply()
    return cache_crop_fix.status().patches


def _owners(qualnames):
    """Every class and module a patch touches, plus every class of `transformers.cache_utils`."""
    owners = {_resolve(qualname)[0] for qualname in qualnames}
    owners |= {
        value
        for value in vars(upstream_cache_utils).values()
        if isinstance(value, type) and value.__module__ == upstream_cache_utils.__name__
    }
    return owners | {upstream_cache_utils, upstream_candidate_generator}


def _snapshot(owners):
    return {
        owner: {name: value for name, value in vars(owner).items() if name != "__warningregistry__"}
        for owner in owners
    }


def _differences(before, after):
    """Names whose attribute was added, removed or replaced by another object (compared by identity)."""
    differences = []
    for owner, attributes in before.items():
        for name in attributes.keys() | after[owner].keys():
            if attributes.get(name, patcher.MISSING) is not after[owner].get(name, patcher.MISSING):
                differences.append(f"{getattr(owner, '__qualname__', owner.__name__)}.{name}")
    return sorted(differences)


def _upstream_module_imports(name):
    """Whether `transformers/cache_utils.py` itself imports module `name` at top level."""
    tree = ast.parse((TRANSFORMERS_DIR / "cache_utils.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Import) and any((alias.asname or alias.name) == name for alias in node.names):
            return True
    return False


def _filled_cache(num_tokens=3):
    key = torch.arange(num_tokens, dtype=torch.float32).reshape(1, 1, num_tokens, 1)
    cache = DynamicCache()
    cache.update(key, key.clone(), layer_idx=0)
    return cache


def _crop_quietly(cache, argument):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        cache.crop(argument)
    return cache.get_seq_length()


def _assert_is_upstream(owner, name, qualname):
    """The attribute is transformers' own: defined in its source file, with the recorded source fingerprint."""
    function = inspect.unwrap(patcher._unwrap(vars(owner)[name]))
    assert Path(function.__code__.co_filename).resolve().is_relative_to(TRANSFORMERS_DIR), qualname
    if qualname in UPSTREAM_FINGERPRINTS:
        assert patcher.source_fingerprint(vars(owner)[name]) in UPSTREAM_FINGERPRINTS[qualname], qualname


# Apply / revert


def test_apply_is_idempotent(restore_fix_state):
    qualnames = _applied_patches()
    owners = _owners(qualnames)
    applied = _snapshot(owners)
    cache_crop_fix.apply()
    assert cache_crop_fix.is_active()
    assert _differences(applied, _snapshot(owners)) == []
    assert cache_crop_fix.status().patches == qualnames


def test_revert_is_idempotent(restore_fix_state):
    owners = _owners(_applied_patches())
    cache_crop_fix.revert()
    reverted = _snapshot(owners)
    cache_crop_fix.revert()
    assert not cache_crop_fix.is_active()
    assert _differences(reverted, _snapshot(owners)) == []


def test_apply_changes_exactly_the_declared_patches(restore_fix_state):
    qualnames = _applied_patches()
    assert EXPECTED_PATCHES <= set(qualnames)
    assert len(set(qualnames)) == len(qualnames)
    owners = _owners(qualnames)
    cache_crop_fix.revert()
    reverted = _snapshot(owners)
    cache_crop_fix.apply()
    changed = _differences(reverted, _snapshot(owners))
    # `_differences` names owners by their qualname, without the module of a class
    declared = sorted(
        f"{getattr(owner, '__qualname__', owner.__name__)}.{name}" for owner, name in map(_resolve, qualnames)
    )
    assert changed == declared


def test_revert_restores_upstream_and_deletes_additions(restore_fix_state):
    qualnames = _applied_patches()
    cache_crop_fix.revert()
    for qualname in qualnames:
        owner, name = _resolve(qualname)
        if qualname in UPSTREAM_FINGERPRINTS:
            _assert_is_upstream(owner, name, qualname)
    # What the fix adds is gone again
    assert "_check_crop" not in vars(DynamicLayer)
    assert "_check_crop" not in vars(DynamicSlidingWindowLayer)
    assert "_crop" not in vars(Cache)
    for helper in ("_check_crop_argument", "_as_crop_int", "_get_crop_length"):
        assert helper not in vars(upstream_cache_utils)
    # The modules our code needs are only left in place if upstream imports them itself
    for module_name in ("warnings", "operator"):
        assert (module_name in vars(upstream_cache_utils)) == _upstream_module_imports(module_name)
    # And the stock behaviour is back
    assert _crop_quietly(_filled_cache(), 0) == 3


def test_apply_revert_cycles_restore_the_same_originals(restore_fix_state):
    owners = _owners(_applied_patches())
    cache_crop_fix.revert()
    pristine = _snapshot(owners)
    cache_crop_fix.apply()
    applied = _snapshot(owners)
    assert _differences(pristine, applied) != []
    cache_crop_fix.revert()
    assert _differences(pristine, _snapshot(owners)) == []
    # The second cycle installs the very same functions, and restores the very same originals
    cache_crop_fix.apply()
    assert _differences(applied, _snapshot(owners)) == []
    assert _crop_quietly(_filled_cache(), 0) == 0
    cache_crop_fix.revert()
    assert _differences(pristine, _snapshot(owners)) == []
    # Applying twice must not record our functions as the originals
    cache_crop_fix.apply()
    cache_crop_fix.apply()
    cache_crop_fix.revert()
    assert _differences(pristine, _snapshot(owners)) == []
    assert _crop_quietly(_filled_cache(), 0) == 3


# The installed functions


def test_installed_functions_belong_to_the_upstream_module(restore_fix_state):
    for qualname in _applied_patches():
        owner, name = _resolve(qualname)
        value = vars(owner)[name]
        module = owner if isinstance(owner, types.ModuleType) else sys.modules[owner.__module__]
        if isinstance(value, types.ModuleType):
            # A module our code needs (e.g. `warnings`), added to the upstream module's namespace
            assert value is sys.modules[name], qualname
            continue
        if isinstance(value, (str, int, float, tuple, frozenset, Warning)):
            # A constant our code reads (e.g. a warning, or its message), added to the upstream module's namespace as it is
            assert isinstance(owner, types.ModuleType), qualname
            continue
        function = inspect.unwrap(patcher._unwrap(value))
        assert function.__globals__ is vars(module), qualname
        assert function.__module__ == module.__name__, qualname
        expected_qualname = name if isinstance(owner, types.ModuleType) else f"{owner.__qualname__}.{name}"
        assert function.__qualname__ == expected_qualname, qualname
        # The code is ours (the overlay), not upstream's
        assert "cache_crop_fix" in function.__code__.co_filename, qualname


def test_super_cell_is_the_upstream_class(restore_fix_state):
    cells_checked = []
    for qualname in _applied_patches():
        owner, name = _resolve(qualname)
        if isinstance(owner, types.ModuleType):
            continue
        function = inspect.unwrap(patcher._unwrap(vars(owner)[name]))
        cells = dict(zip(function.__code__.co_freevars, function.__closure__ or ()))
        if "__class__" in cells:
            assert cells["__class__"].cell_contents is owner, qualname
            cells_checked.append(qualname)
    assert "transformers.cache_utils.DynamicSlidingWindowLayer.crop" in cells_checked
    assert "transformers.cache_utils.DynamicIndexedLayer.crop" in cells_checked


def test_zero_argument_super_works_on_sliding_and_hybrid_layers(restore_fix_state):
    cache_crop_fix.apply()
    key = torch.arange(3, dtype=torch.float32).reshape(1, 1, 3, 1)

    cache = Cache(layers=[DynamicSlidingWindowLayer(sliding_window=8), DynamicIndexedLayer()])
    for layer_idx in range(2):
        cache.update(key, key.clone(), layer_idx=layer_idx)
    cache.update_indexer(key[:, 0], layer_idx=1)
    cache.crop(-1)
    assert cache.layers[0].keys.flatten().tolist() == [0.0, 1.0]
    assert cache.layers[0].cumulative_length == 2
    assert cache.layers[1].indexer_keys.flatten().tolist() == [0.0, 1.0]

    # The hybrid layer's upstream `crop` calls `DynamicSlidingWindowLayer.crop(self, ...)`, whose `super()` must resolve
    # along the hybrid's MRO (a `__class__` cell pointing at the overlay's class would raise a TypeError here)
    assert DynamicSlidingWindowLayer in LinearAttentionAndSlidingWindowAttentionLayer.__mro__
    layer = LinearAttentionAndSlidingWindowAttentionLayer(sliding_window=8)
    layer.activate_past_recording()
    cache = Cache(layers=[layer])
    cache.update(key, key.clone(), layer_idx=0)
    cache.update_conv_state(torch.arange(6, dtype=torch.float32).reshape(1, 2, 3), layer_idx=0, conv_kernel_size=2)
    cache.update_conv_state(torch.tensor([[[10.0], [11.0]]]), layer_idx=0)
    cache.crop(-1)
    assert layer.keys.flatten().tolist() == [0.0, 1.0]
    assert layer.cumulative_length == 2
    assert cache.get_seq_length() == 2
    assert layer.conv_states[0].tolist() == [[[1.0, 2.0], [4.0, 5.0]]]


def test_existing_caches_follow_apply_and_revert(restore_fix_state):
    cache_crop_fix.revert()
    made_while_stock = [_filled_cache() for _ in range(2)]
    cache_crop_fix.apply()
    made_while_fixed = [_filled_cache() for _ in range(2)]
    assert _crop_quietly(made_while_stock[0], 0) == 0
    assert _crop_quietly(made_while_stock[1], -5) == 0
    cache_crop_fix.revert()
    # Stock 5.14.1 behaviour: `crop(0)` keeps everything, `crop(-5)` keeps a stale token
    assert _crop_quietly(made_while_fixed[0], 0) == 3
    assert _crop_quietly(made_while_fixed[1], -5) == 1


# status(), versions, fingerprints


def test_status_fields(restore_fix_state):
    cache_crop_fix.apply()
    state = cache_crop_fix.status()
    assert state.active is True
    assert state.transformers_version == transformers.__version__
    assert state.supported is True
    assert isinstance(state.patches, tuple) and all(isinstance(name, str) for name in state.patches)
    assert EXPECTED_PATCHES <= set(state.patches)
    assert isinstance(state.pending_modules, tuple)
    # A lazily patched module is either already patched or still pending, never both
    owners = [_resolve(qualname)[0] for qualname in state.patches]
    patched_modules = {owner.__name__ if isinstance(owner, types.ModuleType) else owner.__module__ for owner in owners}
    assert not patched_modules & set(state.pending_modules)
    assert (PI0_SAMPLE_ACTIONS in state.patches) == (PI0_MODULE in sys.modules)
    assert (PI0_MODULE in state.pending_modules) == (PI0_MODULE not in sys.modules)
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.active = False

    cache_crop_fix.revert()
    state = cache_crop_fix.status()
    assert state.active is False
    assert state.supported is True
    assert state.patches == ()
    assert state.pending_modules == ()


@pytest.mark.parametrize(
    "version, supported",
    [
        ("5.14.0", True),
        ("5.14.1", True),
        ("5.14.9", True),
        ("5.14.1.post1", True),
        ("5.14.0rc1", False),
        ("5.13.2", False),
        ("5.15.0.dev0", False),
        ("5.15.0rc1", False),
        ("5.15.0", False),
        ("6.0.0", False),
    ],
)
def test_is_supported_version(version, supported):
    assert patcher.is_supported_version(version) is supported


@pytest.mark.parametrize(
    "version",
    [
        "5.13.9",
        "5.14.0",
        "5.14.1",
        "5.14.9",
        "5.15.0",
        "5.19.2",
        "5.23.1",
        "5.24.0",
        "5.24.7",
        "5.25.0",
        "5.25.3",
        "5.26.0",
    ],
)
def test_declared_dependency_matches_the_targets(version):
    # What pip may install must be exactly what a target supports: no release the fix refuses, none it leaves out
    requirement = next(
        Requirement(line)
        for line in importlib.metadata.requires("cache_crop_fix")
        if Requirement(line).name == "transformers"
    )
    assert requirement.specifier.contains(version, prereleases=True) is (target_for(version) is not None)


def test_installed_transformers_matches_the_recorded_fingerprints(capsys):
    fingerprints = patcher.installed_fingerprints()
    assert set(fingerprints) == set(UPSTREAM_FINGERPRINTS)
    for qualname, fingerprint in fingerprints.items():
        assert fingerprint in UPSTREAM_FINGERPRINTS[qualname], qualname
    # `python -m cache_crop_fix fingerprints` prints them in the format of `fingerprints.py`
    assert cli_main(["fingerprints"]) == 0
    printed = re.findall(
        r'^    "([\w.]+)": frozenset\(\{"([0-9a-f]{16})"\}\),$', capsys.readouterr().out, re.MULTILINE
    )
    assert dict(printed) == fingerprints


# In fresh interpreters

SEED_REPRODUCTION = """
import torch
from transformers import DynamicCache

key = torch.arange(3, dtype=torch.float32).reshape(1, 1, 3, 1)

cache = DynamicCache()
cache.update(key, key.clone(), layer_idx=0)
cache.crop(0)
print(cache.get_seq_length())  # 3, expected 0

cache = DynamicCache()
cache.update(key, key.clone(), layer_idx=0)
cache.crop(-5)
print(cache.get_seq_length())  # 1, expected 0
"""

# Shared by the scripts below: snapshots of the upstream classes and modules, compared by identity
SNAPSHOT_HELPERS = """
import json
import sys
import warnings


def owners(modules):
    result = list(modules)
    for module in modules:
        result += [v for v in vars(module).values() if isinstance(v, type) and v.__module__ == module.__name__]
    return result


def snapshot(modules):
    return {o: {k: v for k, v in vars(o).items() if k != "__warningregistry__"} for o in owners(modules)}


def differences(before, after):
    missing = object()
    names = []
    for owner, attributes in before.items():
        owner_name = owner.__name__ if owner.__class__.__name__ == "module" else f"{owner.__module__}.{owner.__qualname__}"
        for name in attributes.keys() | after[owner].keys():
            if attributes.get(name, missing) is not after[owner].get(name, missing):
                names.append(f"{owner_name}.{name}")
    return sorted(names)


def seed():
    import torch
    from transformers import DynamicCache

    lengths = []
    for argument in (0, -5):
        key = torch.arange(3, dtype=torch.float32).reshape(1, 1, 3, 1)
        cache = DynamicCache()
        cache.update(key, key.clone(), layer_idx=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            cache.crop(argument)
        lengths.append(cache.get_seq_length())
    return lengths


def caught_warnings(caught):
    return [[w.category.__name__, str(w.message), w.filename] for w in caught]
"""

# The pristine classes, captured before `cache_crop_fix` is ever imported; then a model module imported afterwards
PRISTINE_SCRIPT = """
import inspect

import transformers.cache_utils
import transformers.generation.candidate_generator
import transformers.generation.utils

modules = [transformers.cache_utils, transformers.generation.candidate_generator, transformers.generation.utils]
pristine = snapshot(modules)
upstream_has = {name: name in vars(transformers.cache_utils) for name in ("warnings", "operator")}
meta_path = list(sys.meta_path)

import cache_crop_fix
from cache_crop_fix import patcher

result = {"upstream_has": upstream_has, "active": cache_crop_fix.is_active()}
result["patches"] = list(cache_crop_fix.status().patches)
result["applied"] = differences(pristine, snapshot(modules))
cache_crop_fix.revert()
result["reverted"] = differences(pristine, snapshot(modules))
result["meta_path_restored"] = sys.meta_path == meta_path
cache_crop_fix.apply()
cache_crop_fix.apply()
result["reapplied"] = differences(pristine, snapshot(modules))
result["seed_reapplied"] = seed()
cache_crop_fix.revert()
cache_crop_fix.revert()
result["reverted_again"] = differences(pristine, snapshot(modules))
result["seed_reverted"] = seed()
cache_crop_fix.apply()

# Model modules are patched when transformers imports them, and only while the fix is active
result["imported_eagerly"] = PI0_MODULE in sys.modules
result["pending"] = list(cache_crop_fix.status().pending_modules)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from transformers.models.pi0 import modeling_pi0
result["pi0_import_warnings"] = caught_warnings(caught)


def sample_actions():
    function = inspect.unwrap(vars(modeling_pi0.PI0ForConditionalGeneration)["sample_actions"])
    return [function.__code__.co_filename, function.__globals__ is vars(modeling_pi0), function.__module__]


result["pi0_patched"] = sample_actions()
state = cache_crop_fix.status()
result["pi0_listed"] = PI0_SAMPLE_ACTIONS in state.patches
result["pending_after_pi0_import"] = list(state.pending_modules)
cache_crop_fix.revert()
result["pi0_reverted"] = sample_actions()
result["pi0_reverted_fingerprint"] = patcher.source_fingerprint(
    vars(modeling_pi0.PI0ForConditionalGeneration)["sample_actions"]
)
result["pi0_meta_path_restored"] = sys.meta_path == meta_path
cache_crop_fix.apply()
result["pi0_reapplied"] = sample_actions()
print(json.dumps(result))
"""

# Version guard and fingerprint guard (model modules are not imported until the end)
GUARD_SCRIPT = """
import contextlib
import io

import transformers
import transformers.cache_utils
import transformers.generation.candidate_generator

modules = [transformers.cache_utils, transformers.generation.candidate_generator]
pristine = snapshot(modules)
real_version = transformers.__version__
result = {}

transformers.__version__ = "5.15.0"
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import cache_crop_fix
    import cache_crop_fix  # a second import does not warn again
result["import_warnings"] = caught_warnings(caught)
result["active"] = cache_crop_fix.is_active()
result["changed"] = differences(pristine, snapshot(modules))
result["seed"] = seed()
try:
    cache_crop_fix.apply()
except cache_crop_fix.UnsupportedTransformersError as error:
    result["apply_error"] = str(error)
result["changed_after_apply"] = differences(pristine, snapshot(modules))
state = cache_crop_fix.status()
result["status"] = [state.active, state.transformers_version, state.supported, list(state.patches)]
from cache_crop_fix.__main__ import main
output = io.StringIO()
with contextlib.redirect_stdout(output):
    result["cli_status_code"] = main(["status"])
result["cli_status_output"] = output.getvalue()

# A supported version whose replaced methods differ from the recorded fingerprints
transformers.__version__ = real_version
from cache_crop_fix.targets.v5_14 import FINGERPRINTS as fingerprints
recorded = dict(fingerprints)

del fingerprints["transformers.cache_utils.DynamicLayer.crop"]
try:
    cache_crop_fix.apply()
except cache_crop_fix.UnsupportedTransformersError as error:
    result["missing_error"] = str(error)
result["changed_after_missing"] = differences(pristine, snapshot(modules))
fingerprints.update(recorded)

# The mismatch is in the second module: the first one must not be patched either
fingerprints[UPDATE_PAST_AND_MASKS] = frozenset({"0000000000000000"})
try:
    cache_crop_fix.apply()
except cache_crop_fix.UnsupportedTransformersError as error:
    result["mismatch_error"] = str(error)
result["changed_after_mismatch"] = differences(pristine, snapshot(modules))
result["active_after_mismatch"] = cache_crop_fix.is_active()
result["seed_after_mismatch"] = seed()
fingerprints.update(recorded)

cache_crop_fix.apply()
result["active_after_fixing"] = cache_crop_fix.is_active()
result["seed_after_fixing"] = seed()

# A lazily patched model module that does not match: its import still works, it stays stock, with a warning
fingerprints[PI0_SAMPLE_ACTIONS] = frozenset({"0000000000000000"})
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from transformers.models.pi0 import modeling_pi0
result["pi0_warnings"] = caught_warnings(caught)
from cache_crop_fix import patcher
sample_actions = vars(modeling_pi0.PI0ForConditionalGeneration)["sample_actions"]
result["pi0_fingerprint_is_upstream"] = patcher.source_fingerprint(sample_actions) in recorded[PI0_SAMPLE_ACTIONS]
result["pi0_pending"] = list(cache_crop_fix.status().pending_modules)
result["seed_at_end"] = seed()
print(json.dumps(result))
"""

SCRIPTS = {
    "seed_with_fix": "import cache_crop_fix  # noqa\n" + SEED_REPRODUCTION,
    "seed_without_fix": SEED_REPRODUCTION,
    "pristine": SNAPSHOT_HELPERS + PRISTINE_SCRIPT,
    "guard": SNAPSHOT_HELPERS + GUARD_SCRIPT,
}
CONSTANTS = f"UPDATE_PAST_AND_MASKS = {UPDATE_PAST_AND_MASKS!r}\nPI0_MODULE = {PI0_MODULE!r}\nPI0_SAMPLE_ACTIONS = {PI0_SAMPLE_ACTIONS!r}\n"


@pytest.fixture(scope="module")
def fresh_interpreters(tmp_path_factory):
    """Runs every script (and `python -m cache_crop_fix status`) in its own interpreter, all at once."""
    directory = tmp_path_factory.mktemp("scripts")
    env = {key: value for key, value in os.environ.items() if not key.startswith("CACHE_CROP_FIX")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT / "src"), env.get("PYTHONPATH")]))
    commands = {"status_cli": [sys.executable, "-m", "cache_crop_fix", "status"]}
    for name, script in SCRIPTS.items():
        path = directory / f"{name}.py"
        path.write_text(CONSTANTS + textwrap.dedent(script))
        commands[name] = [sys.executable, str(path)]
    processes = {
        name: subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for name, command in commands.items()
    }
    results = {}
    for name, process in processes.items():
        stdout, stderr = process.communicate(timeout=600)
        results[name] = subprocess.CompletedProcess(commands[name], process.returncode, stdout, stderr)
    results["directory"] = directory
    return results


def _json_result(fresh_interpreters, name):
    completed = fresh_interpreters[name]
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_seed_reproduction_with_the_fix(fresh_interpreters):
    completed = fresh_interpreters["seed_with_fix"]
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["0", "0"]
    # `crop(0)` is an absolute crop: deprecated, and attributed to the script's line
    script = fresh_interpreters["directory"] / "seed_with_fix.py"
    line = script.read_text().splitlines().index("cache.crop(0)") + 1
    assert f"{script}:{line}: FutureWarning" in completed.stderr
    assert completed.stderr.count("FutureWarning") == 1


def test_seed_reproduction_without_the_fix(fresh_interpreters):
    completed = fresh_interpreters["seed_without_fix"]
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["3", "1"]
    assert "Warning" not in completed.stderr


def test_revert_restores_the_pristine_classes_of_a_fresh_interpreter(fresh_interpreters):
    result = _json_result(fresh_interpreters, "pristine")
    assert result["active"]
    # `import cache_crop_fix` changed exactly what it declares, and nothing else
    assert result["applied"] == sorted(result["patches"])
    assert EXPECTED_PATCHES <= set(result["applied"])
    for module_name in ("warnings", "operator"):
        added = f"transformers.cache_utils.{module_name}" in result["applied"]
        assert added == (not result["upstream_has"][module_name])
    # Each revert puts back the very objects captured before the first import
    assert result["reverted"] == []
    assert result["reverted_again"] == []
    assert result["meta_path_restored"]
    assert result["reapplied"] == result["applied"]
    assert result["seed_reapplied"] == [0, 0]
    assert result["seed_reverted"] == [3, 1]


def test_unsupported_version_warns_once_and_leaves_transformers_stock(fresh_interpreters):
    result = _json_result(fresh_interpreters, "guard")
    directory = fresh_interpreters["directory"]
    assert len(result["import_warnings"]) == 1
    category, message, filename = result["import_warnings"][0]
    assert category == "RuntimeWarning"
    assert supported_ranges() in message and "5.15.0" in message
    # Attributed to the program's `import cache_crop_fix` line
    assert Path(filename) == directory / "guard.py"
    assert not result["active"]
    assert result["changed"] == []
    assert result["seed"] == [3, 1]


def test_apply_on_an_unsupported_version_raises(fresh_interpreters):
    result = _json_result(fresh_interpreters, "guard")
    assert supported_ranges() in result["apply_error"]
    assert "5.15.0" in result["apply_error"]
    assert result["changed_after_apply"] == []
    assert result["status"] == [False, "5.15.0", False, []]
    # `python -m cache_crop_fix status` reports it, with a non-zero exit code
    assert result["cli_status_code"] == 1
    assert "inactive" in result["cli_status_output"]
    assert "5.15.0 (unsupported" in result["cli_status_output"]


def test_fingerprint_mismatch_refuses_and_patches_nothing(fresh_interpreters):
    result = _json_result(fresh_interpreters, "guard")
    assert "transformers.cache_utils.DynamicLayer.crop has no recorded fingerprint" in result["missing_error"]
    assert result["changed_after_missing"] == []
    assert f"{UPDATE_PAST_AND_MASKS} differs from the upstream source" in result["mismatch_error"]
    assert "nothing was patched" in result["mismatch_error"]
    # The first module matched, but it was not patched either: the fix is installed whole or not at all
    assert result["changed_after_mismatch"] == []
    assert not result["active_after_mismatch"]
    assert result["seed_after_mismatch"] == [3, 1]
    # Once the fingerprints match again, the fix applies
    assert result["active_after_fixing"]
    assert result["seed_after_fixing"] == [0, 0]


def test_mismatched_model_module_is_left_stock_on_import(fresh_interpreters):
    result = _json_result(fresh_interpreters, "guard")
    assert len(result["pi0_warnings"]) == 1
    category, message, _ = result["pi0_warnings"][0]
    assert category == "RuntimeWarning"
    assert f"left {PI0_MODULE} unpatched" in message and PI0_SAMPLE_ACTIONS in message
    assert result["pi0_fingerprint_is_upstream"]
    assert PI0_MODULE in result["pi0_pending"]
    assert result["seed_at_end"] == [0, 0]


def test_model_modules_are_patched_when_imported(fresh_interpreters):
    result = _json_result(fresh_interpreters, "pristine")
    assert not result["imported_eagerly"]
    assert PI0_MODULE in result["pending"]
    assert result["pi0_import_warnings"] == []
    filename, globals_are_upstream, module = result["pi0_patched"]
    assert "cache_crop_fix" in filename and globals_are_upstream and module == PI0_MODULE
    assert result["pi0_listed"]
    assert PI0_MODULE not in result["pending_after_pi0_import"]
    # `revert()` restores upstream's method and removes the import hook
    filename, globals_are_upstream, module = result["pi0_reverted"]
    assert Path(filename).resolve().is_relative_to(TRANSFORMERS_DIR) and globals_are_upstream
    assert result["pi0_reverted_fingerprint"] in UPSTREAM_FINGERPRINTS[PI0_SAMPLE_ACTIONS]
    assert result["pi0_meta_path_restored"]
    # `apply()` patches the model modules that were imported while it was reverted
    assert "cache_crop_fix" in result["pi0_reapplied"][0]


def _lists_patch(output, qualname):
    """The status output names `qualname`, in full or as `Class.method` next to its module."""
    module = _resolve(qualname)[0]
    module_name = module.__name__ if isinstance(module, types.ModuleType) else module.__module__
    name = qualname.removeprefix(module_name + ".")
    return any(qualname in line or {name, module_name} <= set(line.split()) for line in output.splitlines())


def test_status_command(fresh_interpreters):
    completed = fresh_interpreters["status_cli"]
    assert completed.returncode == 0, completed.stdout + completed.stderr
    output = completed.stdout
    assert re.search(r"\bactive\b", output) and "inactive" not in output
    assert re.search(rf"{re.escape(transformers.__version__)} \(supported\b", output)
    assert "supported; target v5_14, the 5.14 backport" in output
    assert torch.__version__ in output
    for qualname in EXPECTED_PATCHES:
        assert _lists_patch(output, qualname), qualname
    assert "Warning" not in completed.stderr


# The fingerprints of the upstream methods the 5.14 overlay replaces, as recorded in `targets/v5_14.py`, written out
# here so that a change of the recorded table is a visible change of this test too
EXPECTED_5_14_FINGERPRINTS = {
    "transformers.cache_utils.Cache.activate_past_recording": "92ab199542b21909",
    "transformers.cache_utils.Cache.crop": "ed59d37995911aa6",
    "transformers.cache_utils.Cache.update": "679ec869a03c9450",
    "transformers.cache_utils.DynamicIndexedLayer.crop": "db056caf527df7d9",
    "transformers.cache_utils.DynamicLayer.crop": "f733554ffaaab390",
    "transformers.cache_utils.DynamicSlidingWindowLayer.crop": "a233961b69f230fd",
    "transformers.cache_utils.EncoderDecoderCache.crop": "7a371cf940291c93",
    "transformers.cache_utils.LinearAttentionAndFullAttentionLayer.crop": "108f6e160ad75d46",
    "transformers.cache_utils.LinearAttentionAndSlidingWindowAttentionLayer.crop": "fc1ffb404f8217cd",
    "transformers.cache_utils.LinearAttentionCacheLayerMixin.activate_past_recording": "e0ef344a1257c906",
    "transformers.cache_utils.LinearAttentionCacheLayerMixin.crop": "250ff98eeedf0119",
    "transformers.cache_utils.LinearAttentionLayer.update_conv_state": "a3cb5a9b54326b1f",
    "transformers.cache_utils.LinearAttentionLayer.update_recurrent_state": "1269b2100e6fbf2e",
    "transformers.generation.candidate_generator.AssistedCandidateGenerator.__init__": "ab8675bcf8a7b8b7",
    "transformers.generation.candidate_generator.AssistedCandidateGenerator._update_past_and_masks": "8fbfdda003628960",
    "transformers.generation.utils.GenerationMixin._assisted_decoding": "9475d1c4bcc049e0",
    "transformers.models.minimax.modeling_minimax.MiniMaxCache.crop": "0da72794b2e1ed9b",
    "transformers.models.minimax_m3_vl.modeling_minimax_m3_vl.MiniMaxM3VLSparseCacheLayer.crop": "dc74aa3f977f0ca4",
    "transformers.models.pi0.modeling_pi0.PI0ForConditionalGeneration.sample_actions": "a44420943ba3f954",
}


def _fingerprint_from_installed_file(qualname):
    """sha256 (first 16 hex digits) of the dedented source of an upstream method, read from the installed file with
    the line numbers `ast` gives (decorators included), without importing the module or using the patcher."""
    import hashlib

    module, class_name, method_name = qualname.rsplit(".", 2)
    path = TRANSFORMERS_DIR.joinpath(*module.split(".")[1:]).with_suffix(".py")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    (class_node,) = [
        node for node in ast.parse("".join(lines)).body if isinstance(node, ast.ClassDef) and node.name == class_name
    ]
    (method,) = [node for node in class_node.body if isinstance(node, ast.FunctionDef) and node.name == method_name]
    first_line = min([method.lineno, *(decorator.lineno for decorator in method.decorator_list)])
    source = textwrap.dedent("".join(lines[first_line - 1 : method.end_lineno]))
    return hashlib.sha256(source.encode()).hexdigest()[:16]


@pytest.mark.skipif(not transformers.__version__.startswith("5.14."), reason="the 5.14 target's upstream sources")
def test_recorded_fingerprints_match_an_independent_hash_of_the_installed_sources():
    from cache_crop_fix.targets.v5_14 import FINGERPRINTS

    assert {qualname: set(values) for qualname, values in FINGERPRINTS.items()} == {
        qualname: {value} for qualname, value in EXPECTED_5_14_FINGERPRINTS.items()
    }
    for qualname, expected in EXPECTED_5_14_FINGERPRINTS.items():
        assert _fingerprint_from_installed_file(qualname) == expected, qualname
