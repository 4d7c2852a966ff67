"""Ancestral sampling of y from the decoder p(y|x,z), for a batch of prompts at once.

Each row grows in its own right-padded buffer; causal attention means the
padding after a row's last token never affects its next-token logits, so one
forward pass per step serves rows of every length. No key/value cache: the
sequences are short and this keeps the decoder a single forward().
"""

from __future__ import annotations

import torch

from core.disentanglement.batching import SequenceBatch
from core.disentanglement.decoder import Decoder


@torch.inference_mode()
def sample_outputs(
    decoder: Decoder,
    prompts: SequenceBatch,
    latent: torch.Tensor | None,
    *,
    eos_id: int,
    max_new_tokens: int,
    generator: torch.Generator | None = None,
    temperature: float = 1.0,
) -> list[list[int]]:
    """y token ids for each prompt (<bos> x <sep> of `prompts`), ending at <eos> or after max_new_tokens."""
    size = prompts.tokens.shape[0]
    max_new_tokens = min(max_new_tokens, decoder.config.max_len - int(prompts.y_start.max()))
    tokens = torch.full((size, int(prompts.y_start.max()) + max_new_tokens), eos_id, dtype=torch.long, device=prompts.tokens.device)
    for row, start in enumerate(prompts.y_start.tolist()):
        tokens[row, :start] = prompts.tokens[row, :start]
    position = prompts.y_start.clone()  # [B] next column to fill
    finished = torch.zeros(size, dtype=torch.bool, device=tokens.device)
    for _ in range(max_new_tokens):
        logits = decoder.logits_at(tokens, (position - 1)[:, None], latent)[:, 0]  # [B, V]
        probs = torch.softmax(logits / temperature, dim=-1)
        drawn = torch.multinomial(probs, 1, generator=generator)[:, 0]
        drawn = torch.where(finished, eos_id, drawn)
        tokens[torch.arange(size), position.clamp_max(tokens.shape[1] - 1)] = drawn
        finished |= drawn == eos_id
        position = torch.where(finished, position, position + 1)
        if bool(finished.all()):
            break
    outputs = []
    for row, start in enumerate(prompts.y_start.tolist()):
        generated = tokens[row, start:].tolist()
        outputs.append(generated[: generated.index(eos_id) + 1] if eos_id in generated else generated)
    return outputs
