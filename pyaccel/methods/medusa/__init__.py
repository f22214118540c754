"""Medusa heads: trained on the target's own hidden states, decoded as token trees.

    heads      the head math (shared by training, evaluation and decoding)
    trees      static and dynamic candidate trees over the heads' ranked choices
    calibration  how far tree scores are from what verification keeps, learnt online
    proposer   `Medusa`, the decoding method
"""

from __future__ import annotations

from .heads import HeadsMeta, HeadWeights, MedusaHeads
from .proposer import Medusa, MedusaTuning

__all__ = ["HeadWeights", "HeadsMeta", "Medusa", "MedusaHeads", "MedusaTuning"]
