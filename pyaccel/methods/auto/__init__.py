"""`auto`: one draft tree merged from every proposer, sized by the cost model.

    candidate  `Candidate`, the public candidates API the proposers share
    merge      `merge_trees`: candidate trees -> one prefix tree with combined estimates
    policy     `AutoTuning` and the decisions (which proposers run, what is verified)
    proposer   `Auto`, the method (import it from `pyaccel` or `.proposer`: the
               proposers it combines import `candidate`, so this package imports nothing
               of theirs)
"""

from __future__ import annotations

from ..candidate import Candidate

__all__ = ["Candidate"]
