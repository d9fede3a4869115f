"""Why each test fails under `pytest --stock` (issue 13): the behaviour differs, or only an API or message does.

`conftest.py` prints the counts at the end of a `--stock` run (and lists any failing test that no rule classifies):

- **behaviour**: on stock 5.14 the state after the call differs (lengths, tensors, side tensors, linear states, a
  half-changed cache after a refusal) or the call crashes (e.g. `crop` missing on static layers, assisted decoding with a
  1-token prompt), or a library call site passes the absolute form;
- **api**: the test exercises an API stock lacks (`tokens_to_remove=`, the `FutureWarning` of absolute crops, argument
  type checks where stock already does the same thing to the cache);
- **wording**: stock already refuses without changing anything; only the exception type or message differs;
- **tooling**: not evidence about `crop` (a generated page that must be regenerated fails in both modes).

Rules are regular expressions over the test id, tried in order; the first match wins.
"""

import re


BEHAVIOUR, API, WORDING = "behaviour", "api", "wording"

RULES = [
    # Wording: stock refuses atomically too
    (r"MiniMaxCacheCropTest::test_refuses_clearly", WORDING),
    (r"LayerLevelEdgeCasesTest::test_linear_layer_refuses_absolute_lengths", WORDING),
    (r"CropRefusalsAndNoOpsTest::test_cache_of_linear_layers_only_names_the_cause", WORDING),
    # Fails in both modes until the page is regenerated (a tooling check, not evidence)
    (r"tests/test_audit\.py::test_regeneration_check", "tooling"),
    (r"StaticSlidingWindowLayerCropTest::test_partial_crop_beyond_the_window_raises", WORDING),
    (r"test_recurrent_main_model_fails_clearly_at_first_partial_rollback_2_assistant", WORDING),
    (r"CropArgumentsTest::test_wrong_argument_types_raise_\d+_(float|str|none|multi_element_tensor)\b", WORDING),
    (r"CropArgumentsTest::test_both_arguments_raise", API),
    # API: new keyword, new warning
    (
        r"CropArgumentsTest::test_(absolute_crop_warns_once_per_call|encoder_decoder_absolute_crop_warns_at_the_caller)",
        API,
    ),
    (r"CropArgumentsTest::test_tokens_to_remove_keyword", API),
    (r"LinearStateWithEmptyAttentionCropTest::test_removing_nothing_keeps_the_linear_states", API),
    # Behaviour: everything else in the crop tests (state after the call, crashes, non-atomic refusals)
    (r"CropArgumentsTest::test_wrong_argument_types_raise_\d+_(bool|one_element_tensor|bool_tensor)\b", BEHAVIOUR),
    (r"tests/v5_(14|25)/(utils|generation|models)/", BEHAVIOUR),
    # 5.25: hybrid and SSM main models in assisted decoding: wrong states, wrong tokens or an `IndexError` on stock
    (r"tests/test_generation_main_hybrid\.py", BEHAVIOUR),
    (r"tests/test_rollback_schedules\.py", BEHAVIOUR),
    (r"tests/test_stateful(_hybrid)?\.py", BEHAVIOUR),
    (r"tests/test_generation(_hybrid)?\.py", BEHAVIOUR),
    (r"tests/test_call_sites\.py", BEHAVIOUR),
]


def classify(nodeid):
    for pattern, category in RULES:
        if re.search(pattern, nodeid):
            return category
    return None
