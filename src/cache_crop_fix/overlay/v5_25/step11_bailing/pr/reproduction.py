from transformers import BailingHybridConfig


config = BailingHybridConfig(num_mtp_layers=2)
print(config.get_mtp_config().layer_types)  # 5.25.0: ValueError. With this PR: ['full_attention', 'full_attention']
