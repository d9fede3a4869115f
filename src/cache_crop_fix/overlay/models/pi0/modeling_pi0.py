# Our version of `PI0ForConditionalGeneration.sample_actions` (transformers/models/pi0/modeling_pi0.py, 5.14.x): it
# rolls the cache back to the VLM prefix with a negative crop instead of the deprecated absolute `crop(prefix_length)`.
# The exporter applies it to `modular_pi0.py` as well, where the same method is defined.
import torch


class PI0ForConditionalGeneration:
    @torch.no_grad()
    def sample_actions(
        self,
        state: torch.FloatTensor,
        input_ids: torch.LongTensor,
        pixel_values: torch.FloatTensor,
        noise: torch.FloatTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        pixel_attention_mask: torch.BoolTensor | None = None,
        num_steps: int | None = None,
        **kwargs,
    ) -> torch.FloatTensor:
        """Run flow matching inference to generate actions."""

        num_steps = num_steps or self.config.num_inference_steps
        batch_size = input_ids.shape[0]
        device = input_ids.device

        # 1. Start from Gaussian noise over the whole action chunk, unless it is given
        if noise is None:
            noise_shape = (batch_size, self.config.chunk_size, self.config.max_action_dim)
            noise = torch.normal(mean=0.0, std=1.0, size=noise_shape, dtype=pixel_values.dtype, device=device)

        # 2. Encode the prefix (images + prompt) with the VLM once; its cache is reused by every denoising step
        position_ids = attention_mask.cumsum(-1) - 1 if attention_mask is not None else None
        inputs_embeds = self.model.embed_prefix(input_ids, pixel_values, pixel_attention_mask)
        prefix_outputs = self.model.vlm(
            inputs_embeds=inputs_embeds,
            attention_mask=attention_mask,
            position_ids=position_ids,
            token_type_ids=torch.zeros_like(inputs_embeds)[:, :, 0],
            use_cache=True,
            return_dict=True,
        )
        past_key_values = prefix_outputs.past_key_values
        prefix_length = past_key_values.get_seq_length()

        # 3. Integrate the flow from t=1 to t=0 in `num_steps` Euler steps
        dt = -1.0 / num_steps
        for step in range(num_steps):
            timestep = torch.tensor(1.0 + step * dt, dtype=torch.float32, device=device).expand(batch_size)
            output = self(
                state=state,
                noise=noise,
                timestep=timestep,
                pixel_attention_mask=pixel_attention_mask,
                attention_mask=attention_mask,
                past_key_values=past_key_values,
                **kwargs,
            )
            # Each step must only attend to the VLM prefix: drop the states this step appended after it
            tokens_to_remove = past_key_values.get_seq_length() - prefix_length
            if tokens_to_remove > 0:
                past_key_values.crop(-tokens_to_remove)
            noise = noise + dt * output.logits
        return noise
