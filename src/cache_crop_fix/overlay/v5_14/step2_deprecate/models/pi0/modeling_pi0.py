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
        """
        Sample an action chunk with flow matching: the VLM encodes the prefix (images and prompt) once, then the action
        expert integrates the flow from noise in `num_steps` Euler steps, each attending to the cached prefix only.

        Args:
            state (`torch.FloatTensor` of shape `(batch_size, max_state_dim)`):
                The current robot state.
            input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`):
                The prompt, with image tokens where the image features go.
            pixel_values (`torch.FloatTensor` of shape `(batch_size, num_cameras, num_channels, height, width)`):
                The camera images.
            noise (`torch.FloatTensor` of shape `(batch_size, chunk_size, max_action_dim)`, *optional*):
                The starting point of the flow; sampled from a standard normal distribution if not given.
            attention_mask (`torch.Tensor` of shape `(batch_size, sequence_length)`, *optional*):
                The attention mask of the prefix.
            pixel_attention_mask (`torch.BoolTensor` of shape `(batch_size, num_cameras)`, *optional*):
                Which cameras are present for each sample.
            num_steps (`int`, *optional*):
                The number of denoising steps, `config.num_inference_steps` by default.

        Returns:
            `torch.FloatTensor` of shape `(batch_size, chunk_size, max_action_dim)`: the sampled actions.
        """
        num_steps = num_steps or self.config.num_inference_steps
        batch_size, device = input_ids.shape[0], input_ids.device
        if noise is None:
            noise_shape = (batch_size, self.config.chunk_size, self.config.max_action_dim)
            noise = torch.normal(mean=0.0, std=1.0, size=noise_shape, dtype=pixel_values.dtype, device=device)

        # Encode the prefix once: every denoising step reuses its cache
        inputs_embeds = self.model.embed_prefix(input_ids, pixel_values, pixel_attention_mask)
        past_key_values = self.model.vlm(
            inputs_embeds=inputs_embeds,
            attention_mask=attention_mask,
            position_ids=attention_mask.cumsum(-1) - 1 if attention_mask is not None else None,
            token_type_ids=torch.zeros_like(inputs_embeds)[:, :, 0],
            use_cache=True,
            return_dict=True,
        ).past_key_values
        prefix_length = past_key_values.get_seq_length()
        step_inputs = {
            "state": state,
            "pixel_attention_mask": pixel_attention_mask,
            "attention_mask": attention_mask,
            "past_key_values": past_key_values,
            **kwargs,
        }

        dt = -1.0 / num_steps
        for step in range(num_steps):
            timestep = torch.tensor(1.0 + step * dt, dtype=torch.float32, device=device).expand(batch_size)
            velocity = self(noise=noise, timestep=timestep, **step_inputs).logits
            # Each step must only attend to the prefix: drop the states it appended after it
            tokens_to_remove = past_key_values.get_seq_length() - prefix_length
            if tokens_to_remove > 0:
                past_key_values.crop(-tokens_to_remove)
            noise = noise + dt * velocity
        return noise
