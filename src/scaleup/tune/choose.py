"""One pass over the sizes of a request: candidates queued, pruned, simulated; the tie rule.

Split from :mod:`scaleup.tune.search` (whose docstring explains the branch and bound) so that
choosing the fastest candidate at each size -- cheapest bound first, pruning what cannot win,
exact ties to candidate order (:data:`TIE_RTOL`), the exact check of the winner -- stands apart
from the session that owns the state.
"""

from __future__ import annotations

from collections.abc import Sequence

from scaleup.errors import SimulationError
from scaleup.sim import CompiledSchedule
from scaleup.tune.choice import TunedChoice
from scaleup.tune.msccl import MscclRange, msccl_candidate
from scaleup.tune.nccl_inputs import nvls_channels
from scaleup.tune.nccl_model import ALGO_ORDER, PROTO_ORDER, ModelInputs, cost_table
from scaleup.tune.observe import CandidateOutcome
from scaleup.tune.ofi_tuner import PLUGIN, OfiRegionTuner
from scaleup.tune.p2p_rule import P2pRule
from scaleup.tune.question import Question, Timed
from scaleup.tune.rccl_tables import after_pick
from scaleup.tune.rules import Candidate
from scaleup.tune.size_channels import ChannelTrim

__all__ = ["TIE_RTOL", "SizePass"]

#: Times within this relative difference are a tie (broken by candidate order): the flow-class
#: path and the per-flow path (``--exact``) add the same rates in another order, and a tie in one
#: must stay a tie in the other.
TIE_RTOL = 1e-9


def _beats(time_s: float, order: int, best: tuple[float, int]) -> bool:
    """Whether (``time_s``, ``order``) wins over ``best``: faster beyond a tie, or a tie and
    earlier in candidate order."""
    if time_s < best[0] * (1 - TIE_RTOL):
        return True
    return time_s <= best[0] * (1 + TIE_RTOL) and order < best[1]


class SizePass:
    """One pass over the sizes of a request: the candidates and, when pruning, each candidate's
    time at the last size it was simulated at (a lower bound at every larger size) and the
    previous size's choice (simulated first)."""

    def __init__(
        self,
        question: Question,
        cands: list[Candidate],
        printed: list[tuple[int, int, int]],
        bounds: dict[Candidate, float] | None,
        msccl: Sequence[MscclRange] = (),
        trim: ChannelTrim | None = None,
        p2p: P2pRule | None = None,
        model: ModelInputs | None = None,
        plugin: OfiRegionTuner | None = None,
    ) -> None:
        self.question = question
        self.cands = cands
        self.order = {c: i for i, c in enumerate(cands)}
        self.printed = printed
        self.bounds = bounds
        self.first: Candidate | None = None
        self.msccl = tuple(msccl)
        self.trim = trim
        #: NCCL's p2p rule (:mod:`scaleup.tune.p2p_rule`): one ruled candidate per size
        self.p2p = p2p
        #: NCCL's view of the group where the selection is ``nccl-model`` (else None)
        self.model = model
        #: the network plugin's tuner, which overrides the model's pick where it covers a size
        self.plugin = plugin

    def choose(self, nbytes: int, count: int) -> TunedChoice:
        """NCCL's own pick where the selection is ``nccl-model`` and its model covers the
        candidates (:meth:`_nccl_pick`), else the fastest candidate whose structure passes the
        exact check (see module); RCCL's MSCCL algorithm first where it takes the size
        (:mod:`scaleup.tune.msccl`)."""
        forced = msccl_candidate(self.msccl, nbytes, count)
        if forced is not None:
            choice = self._forced(forced, nbytes, count)
            if choice is not None:
                return choice
        if self.model is not None:
            picked = self._nccl_pick(nbytes, count)
            if picked is not None:
                return picked
        while True:
            cand, timed, considered = self._fastest(nbytes, count)
            verdict = self.question.confirm(cand, timed.chunks)
            if verdict is not None:
                self.first = cand
                return TunedChoice(
                    cand.algorithm,
                    cand.protocol,
                    cand.channels,
                    timed.chunks,
                    timed.time_s,
                    timed.result,
                    verdict,
                    considered,
                )

    def _forced(self, cand: Candidate, nbytes: int, count: int) -> TunedChoice | None:
        """``cand`` timed alone (the library picks it before any tuning), if it can run."""
        timed = self.question.simulate(cand, nbytes, count)
        self._observe(nbytes, count, cand, timed)
        verdict = None if timed is None else self.question.confirm(cand, timed.chunks)
        if timed is None or verdict is None:
            return None
        return TunedChoice(
            cand.algorithm, cand.protocol, cand.channels, timed.chunks, timed.time_s,
            timed.result, verdict, ((cand, timed.time_s),),
        )  # fmt: skip

    def _nccl_pick(self, nbytes: int, count: int) -> TunedChoice | None:
        """NCCL's own pick (``selection="nccl-model"``): the enabled (algorithm, protocol) of
        least time in NCCL's cost model (:mod:`scaleup.tune.nccl_model`; ties to NCCL's order),
        on the channel count NCCL runs it with (:meth:`_nccl_channels`), simulated; the next in
        the model's order where one cannot run here; None where the model covers no candidate
        (the fastest simulated is then taken). Explaining also simulates the other candidates."""
        assert self.model is not None  # noqa: S101 - the caller checks
        pairs = {(c.algorithm, c.protocol) for c in self.cands if c.algorithm in ALGO_ORDER}
        table = cost_table(self.model, self.question.collective, nbytes, sorted(pairs))
        if not table:
            return None
        predicted = tuple((a, p, t * 1e-6) for (a, p), t in table.items())
        if self.question.session.observer is not None:
            self._fastest(nbytes, count)  # every candidate's outcome, for the explanation
        ranked: list[tuple[str, str, int | None]] = [
            (a, p, None)
            for a, p in sorted(
                table, key=lambda ap: (table[ap], ALGO_ORDER.index(ap[0]), PROTO_ORDER.index(ap[1]))
            )
        ]
        plugged = (
            None
            if self.plugin is None
            else self.plugin.pick(self.question.collective, nbytes, table)
        )
        if plugged is not None:  # the plugin set its pair's cost to 0 (ofi_tuner)
            ranked.remove((*plugged, None))
            ranked.insert(0, (*plugged, None))
        if self.model.rccl is not None:  # RCCL's rules after its model (rccl_tables.after_pick)
            first = after_pick(
                self.model.rccl, self.question.collective, nbytes, *ranked[0][:2],
                self.model.comm_channels,
            )  # fmt: skip
            if first != ranked[0]:
                ranked.insert(0, first)
        for algo, proto, fixed in ranked:
            cand = self._nccl_channels(algo, proto, nbytes, fixed)
            if cand is None:
                continue
            timed = self.question.simulate(cand, nbytes, count)
            self._observe(nbytes, count, cand, timed)
            verdict = None if timed is None else self.question.confirm(cand, timed.chunks)
            if timed is None or verdict is None:
                continue
            return TunedChoice(
                cand.algorithm, cand.protocol, cand.channels, timed.chunks, timed.time_s,
                timed.result, verdict, ((cand, timed.time_s),), "nccl-model", predicted,
                "NCCL" if self.model.rccl is None else "RCCL",
                PLUGIN if plugged == (algo, proto) else "",
            )  # fmt: skip
        return None

    def _nccl_channels(
        self, algo: str, proto: str, nbytes: int, fixed: int | None = None
    ) -> Candidate | None:
        """The candidate of (``algo``, ``proto``) on NCCL's channel count: ``comm->nChannels``
        for ring and tree, ``comm->nvlsChannels`` for NVLS (:mod:`scaleup.tune.nccl_inputs`),
        as the largest candidate count not above it (else the least), then trimmed to the size
        as ``topoGetAlgoInfo`` trims it (:mod:`scaleup.tune.size_channels`); ``fixed``: a count
        the library sets without trimming (RCCL's pivot rule)."""
        assert self.model is not None  # noqa: S101 - the caller checks
        counts = sorted(
            c.channels for c in self.cands if (c.algorithm, c.protocol) == (algo, proto)
        )
        if not counts:
            return None
        if fixed is not None:
            target = fixed
        elif algo in ("nvls", "nvls_tree"):
            target = nvls_channels(self.model, algo)
        else:
            target = self.model.comm_channels
        fitting = [c for c in counts if c <= target]
        cand = Candidate(algo, proto, fitting[-1] if fitting else counts[0])
        return cand if self.trim is None or fixed is not None else self.trim.trim(cand, nbytes)

    def _at_size(self, nbytes: int) -> list[Candidate]:
        """The candidates with the channels the library gives them at ``nbytes``
        (:mod:`scaleup.tune.size_channels`; p2p transfers: the channels and protocol of
        :mod:`scaleup.tune.p2p_rule`), each once, in candidate order; a trimmed candidate takes
        the order of the first one trimmed to it unless it is a candidate itself."""
        if self.trim is None and self.p2p is None:
            return self.cands
        out: dict[Candidate, None] = {}
        for cand in self.cands:
            trimmed = cand
            if self.p2p is not None:
                trimmed = self.p2p.pick(self.question.collective, trimmed, nbytes)
            if self.trim is not None:
                trimmed = self.trim.trim(trimmed, nbytes)
            self.order.setdefault(trimmed, self.order[cand])
            out.setdefault(trimmed, None)
        return sorted(out, key=self.order.__getitem__)

    def _queue(self, nbytes: int, count: int) -> list[Candidate]:
        """Candidates in the order they are simulated: cheapest bound first when pruning (so the
        best is found early and prunes the rest), the previous size's choice before all."""
        bounds, order = self.bounds, self.order
        cands = self._at_size(nbytes)
        if bounds is not None:
            queue = sorted(
                cands,
                key=lambda c: (
                    max(bounds.get(c, 0.0), self.question.lower_bound_s(c, count)),
                    order[c],
                ),
            )
        else:
            queue = list(cands)
        if self.first is not None and self.first in queue:
            queue.remove(self.first)
            queue.insert(0, self.first)
        return queue

    def _pruned(self, cand: Candidate, count: int, best: tuple[float, int]) -> bool:
        """Whether ``cand`` cannot beat ``best`` (time, candidate order): a lower bound above the
        best time, or equal to it when ``cand`` comes later in candidate order (a tie it would
        lose); its time at a smaller size, or :meth:`Question.lower_bound_s`."""
        if self.bounds is None:
            return False
        loses = self.order[cand] > best[1]
        for bound in (self.bounds.get(cand, 0.0), self.question.lower_bound_s(cand, count)):
            if bound > best[0] * (1 + TIE_RTOL) or (loses and bound >= best[0] * (1 - TIE_RTOL)):
                return True
        return False

    def _fastest(
        self, nbytes: int, count: int
    ) -> tuple[Candidate, Timed, tuple[tuple[Candidate, float], ...]]:
        """The least simulated time over the candidates (ties: first in candidate order) and
        every (candidate, time) simulated."""
        best: tuple[float, int, Candidate, Timed] | None = None
        considered = []
        for cand in self._queue(nbytes, count):
            if (
                best is not None
                and (
                    self._pruned(cand, count, best[:2])  # its bounds lose: never built
                    or (  # built (as it would be to run it): its congestion bound may lose
                        (cand, count) not in self.question.timed
                        and self.question.prepare(cand, nbytes)
                        and self._pruned(cand, count, best[:2])
                    )
                )
            ):
                self._observe(nbytes, count, cand, None, pruned=True)
                continue
            timed = self.question.simulate(cand, nbytes, count)
            self._observe(nbytes, count, cand, timed)
            if timed is None:
                continue
            considered.append((cand, timed.time_s))
            if self.bounds is not None:
                self.bounds[cand] = timed.time_s
            if best is None or _beats(timed.time_s, self.order[cand], best[:2]):
                best = (timed.time_s, self.order[cand], cand, timed)
        if best is None:
            q = self.question
            reasons = "; ".join(sorted(set(q.failed.values()))) or "no candidate"
            raise SimulationError(
                f"no algorithm can run {q.collective} on {q.nranks} ranks here ({reasons})",
                source=q.topology.name,
            )
        return best[2], best[3], tuple(considered)

    def _observe(
        self, nbytes: int, count: int, cand: Candidate, timed: Timed | None, pruned: bool = False
    ) -> None:
        """Tell the session's observer what became of ``cand`` (nothing when there is none)."""
        q = self.question
        if q.session.observer is None:
            return
        chunks = q.chunks(cand, nbytes)
        key, first = (cand.algorithm, cand.channels, chunks), (cand.algorithm, cand.channels, 1)
        compiled = q.compiled.get(key) or q.compiled.get(first)
        if pruned and compiled is None:  # explaining: the structure whose bound is shown
            compiled = q.compiled_for(*first)
        if not isinstance(compiled, CompiledSchedule):  # a ring pattern: explaining builds none
            compiled = None
        q.session.observer(CandidateOutcome(
            q.topology, q.group, q.collective, nbytes, count, cand, chunks,
            "pruned" if pruned else "failed" if timed is None else "simulated",
            time_s=None if timed is None else timed.time_s, result=timed.result if timed else None,
            bound_s=max((self.bounds or {}).get(cand, 0.0), q.lower_bound_s(cand, count))
            if pruned else None, compiled=compiled, reason=q.failed.get(key, ""),
            step_bytes=q.step_bytes(cand, nbytes) if chunks > 1 else None,
        ))  # fmt: skip
