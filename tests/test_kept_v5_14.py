"""Behaviours of 5.14 that upstream already had and the fix keeps (they pass on stock too, so they are project tests,
not exported ones), each found by a surviving mutant of the semantic family (`utils/mutation_testing.py --family
semantic v5_14`)."""

import unittest
import warnings

import torch

from transformers.cache_utils import Cache, EncoderDecoderCache, StaticLayer

from .compat import TARGET


def _tokens(start, length):
    return torch.arange(start, start + length, dtype=torch.float32).reshape(1, 1, length, 1)


@unittest.skipUnless(TARGET.name == "v5_14", "the 5.14 target's methods")
class EncoderDecoderCacheKeptTest(unittest.TestCase):
    def test_static_self_attention_cache_is_refused_before_anything_happens(self):
        # `EncoderDecoderCache.crop` is only defined for dynamic caches: it refuses a static one first, before it
        # validates (and warns about) the argument, and before anything is cropped
        self_attention = Cache(layers=[StaticLayer(max_cache_len=8)])
        self_attention.update(_tokens(0, 3), _tokens(0, 3), 0)
        cache = EncoderDecoderCache(self_attention, Cache(layers=[StaticLayer(max_cache_len=8)]))
        for argument in (-1, 2):
            with self.subTest(argument=argument), warnings.catch_warnings():
                warnings.simplefilter("error")
                with self.assertRaisesRegex(TypeError, "only defined for dynamic cache"):
                    cache.crop(argument)
                self.assertEqual(int(self_attention.get_seq_length()), 3)
