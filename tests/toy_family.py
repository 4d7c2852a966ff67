"""A toy CVAE family, added the way a new family is: its latent settings, its model class and one registry entry.

The model is the shared discrete CVAE with two codes and no length groups, built from the toy's own settings; what
matters is that nothing outside this module and the registry entry names it.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.disentanglement.cli import setting
from core.disentanglement.latent_configs import DiscreteCVAEConfig
from core.disentanglement.registry import MODELS, Model
from core.disentanglement.shared_discrete_cvae import SharedDiscreteCVAE

NAME = "toy"


@dataclass(frozen=True)
class ToyConfig:
    toy_codes: int = setting(2, "toy model: latent codes")


class ToyCVAE(SharedDiscreteCVAE):
    def __init__(self, decoder_config, config: ToyConfig):
        super().__init__(decoder_config, DiscreteCVAEConfig(num_codes=config.toy_codes, length_groups=1))


def register() -> None:
    """The registry entry; called before the trainer's settings are first imported, as an entry in registry.py is."""
    MODELS[NAME] = Model(ToyConfig, "toy_family:ToyCVAE", auxiliary_terms=())
