"""A run's model, optimiser groups and device, from its settings."""

from __future__ import annotations

import sys

import torch

from core.disentanglement.decoder import DecoderConfig, warm_start
from core.disentanglement.lockstep import SeedStack
from core.disentanglement.registry import MODELS
from core.disentanglement.zfree import load_decoder
from experiments.synthetic_sequences.training.inputs import RunInputs
from experiments.synthetic_sequences.training.settings import TrainConfig


def build_model(config: TrainConfig, vocab_size: int, max_len: int) -> torch.nn.Module:
    """The registered model class of the run's family, with its decoder's size and its latent settings."""
    model = config.model
    decoder_config = DecoderConfig(
        vocab_size=vocab_size, max_len=max_len, d_model=model.d_model, n_layer=model.n_layer, n_head=model.n_head
    )
    return MODELS[model.model].model_class()(decoder_config, model.latent)


def initial_model(config: TrainConfig, inputs: RunInputs) -> torch.nn.Module:
    """The run's model before its first step: sized for the longest sequence of any split, initialised from the run's seed,
    its decoder warm-started from a z-free checkpoint when --init-decoder names one."""
    torch.manual_seed(config.optim.seed)
    max_len = int(max(b.lengths.max() for b in inputs.batchers.values())) + 16
    model = build_model(config, len(inputs.records["train"].vocab), max_len)
    if config.run.init_decoder:
        zfree_decoder, _ = load_decoder(config.run.init_decoder)
        warm_start(model.decoder, zfree_decoder, source=config.run.init_decoder)
    return model


def parameter_groups(named_parameters, config: TrainConfig) -> list[dict]:
    """AdamW groups of (name, parameter) pairs: a warm-started decoder's pretrained weights learn at lr x
    warm_decoder_lr_factor, the rest at lr.

    The latent projection is new in a warm start, so it stays with the encoder at the full rate.
    """
    named = list(named_parameters)
    pretrained = [
        parameter
        for name, parameter in named
        if config.run.init_decoder and name.startswith("decoder.") and not name.startswith("decoder.latent_projection.")
    ]
    chosen = {id(parameter) for parameter in pretrained}
    rest = [parameter for _, parameter in named if id(parameter) not in chosen]
    groups = [{"params": rest, "lr_factor": 1.0}]
    if pretrained:
        groups.append({"params": pretrained, "lr_factor": config.optim.warm_decoder_lr_factor})
    return groups


def build_optimizer(named_parameters, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW over (name, parameter) pairs: a model's named_parameters() or a seed stack's named_stacked()."""
    return torch.optim.AdamW(parameter_groups(named_parameters, config), lr=config.optim.lr, weight_decay=config.optim.weight_decay)


def initial_stack(configs, inputs: RunInputs, device) -> SeedStack:
    """The chunk's seeds in lockstep, each seed's weights those its own run starts from (initial_model)."""
    return SeedStack([initial_model(config, inputs) for config in configs]).to(device)


def resolve_device(name: str) -> torch.device:
    """`auto` is cuda when available, else cpu (with a notice); a named accelerator must be present."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        print("device auto: no CUDA device is visible to this process; training on cpu", file=sys.stderr, flush=True)
        return torch.device("cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device: {name!r} is not available (torch sees no CUDA device); use cpu or auto")
    if name == "mps" and not torch.backends.mps.is_available():
        raise ValueError("device: 'mps' is not available on this machine; use cpu or auto")
    return torch.device(name)
