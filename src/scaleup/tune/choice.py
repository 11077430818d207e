"""The tuner's answer for one collective at one size, and how it reads to a person."""

from __future__ import annotations

from dataclasses import dataclass, field

from scaleup.sim import SimResult
from scaleup.tune.rules import Candidate

__all__ = ["TunedChoice"]


@dataclass(frozen=True)
class TunedChoice:
    """The tuner's answer for one collective at one size.

    ``result`` is the simulation of the chosen schedule and ``time_s`` its time; ``verification``
    how its structure was checked (``exact``, ``lanes`` or ``unchecked``, see
    :mod:`scaleup.tune.checks`); ``considered`` every ``(candidate, time_s)`` simulated at this
    size (pruned candidates are absent).
    """

    algorithm: str
    protocol: str
    channels: int
    chunks: int
    time_s: float
    result: SimResult
    verification: str
    considered: tuple[tuple[Candidate, float], ...] = field(default=(), repr=False, compare=False)
    #: how it was picked (:data:`scaleup.tune.request.SELECTIONS`)
    selection: str = field(default="fastest", compare=False)
    #: NCCL's predicted time (s) of every (algorithm, protocol) its model fills, where the
    #: selection was ``nccl-model`` (:func:`scaleup.tune.nccl_model.cost_table`)
    predicted: tuple[tuple[str, str, float], ...] = field(default=(), repr=False, compare=False)
    #: whose model predicted them: ``NCCL``, or ``RCCL`` on AMD nodes (its own constants)
    model: str = field(default="NCCL", compare=False)
    #: the tuner plugin that chose over the model (:mod:`scaleup.tune.ofi_tuner`; "": none)
    plugin: str = field(default="", compare=False)

    @property
    def candidate(self) -> Candidate:
        """The chosen (algorithm, protocol, channels)."""
        return Candidate(self.algorithm, self.protocol, self.channels)

    def explain(self) -> str:
        """The candidates simulated at this size, fastest first, the choice marked ``*``."""
        head = f"chose {self.algorithm}/{self.protocol}/{self.channels}"
        lines = [f"{head}, {self.chunks} chunks: {self.time_s * 1e6:.2f} us ({self.verification})"]
        for cand, time_s in sorted(self.considered, key=lambda ct: (ct[1], ct[0])):
            mark = "*" if cand == self.candidate else " "
            lines.append(
                f"{mark} {cand.algorithm}/{cand.protocol}/{cand.channels}: {time_s * 1e6:.2f} us"
            )
        if self.plugin:
            lines.append(f"picked by the {self.plugin} over the model's least")
        if self.predicted:
            lines.append(f"{self.model}'s model (tuning.cc), least first:")
            for algo, proto, time_s in sorted(self.predicted, key=lambda p: p[2]):
                mark = "*" if (algo, proto) == (self.algorithm, self.protocol) else " "
                lines.append(f"{mark} {algo}/{proto}: {time_s * 1e6:.2f} us")
        return "\n".join(lines)
