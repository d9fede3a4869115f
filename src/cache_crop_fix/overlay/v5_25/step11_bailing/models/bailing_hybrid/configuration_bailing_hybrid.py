# Step 11 of the fix for transformers 5.25.x, in `transformers/models/bailing_hybrid/configuration_bailing_hybrid.py`:
# the lines `BailingHybridConfig.__post_init__` gains. `get_mtp_config` (which `generate(use_mtp=True)` calls to build
# the MTP layers) refuses a config with `layer_types` but no `mtp_layer_types`, and every Bailing-hybrid config has
# `layer_types` (and `mlp_layer_types`) but had no MTP counterparts: `use_mtp=True` raised a `ValueError` on every
# checkpoint. Its MTP layers are MLA attention and routed-experts layers (as in the original Ling modeling code), the
# defaults now, set as Mellum sets its own; a checkpoint's own values win. Mellum declares the two as dataclass fields:
# the patcher cannot add a field to a class at run time, so the config reads them as the extra attributes
# `PreTrainedConfig.__post_init__` sets from its kwargs (serialised as the fields would be). A codemod rather than a
# copy of the method (see `cache_crop_fix.codemod`); the exporter applies it to `modular_bailing_hybrid.py` as well.

CODEMODS = {
    "BailingHybridConfig.__post_init__": (
        "super().__post_init__(**kwargs)",
        "super().__post_init__(**kwargs)\n"
        "\n"
        "# The MTP layers (`generate(use_mtp=True)`) are MLA attention and routed-experts layers\n"
        'if getattr(self, "mtp_layer_types", None) is None:\n'
        '    self.mtp_layer_types = ["full_attention"] * self.num_mtp_layers\n'
        'if getattr(self, "mtp_mlp_layer_types", None) is None:\n'
        '    self.mtp_mlp_layer_types = ["sparse"] * self.num_mtp_layers',
    )
}
