"""Closed-form alpha-beta cost of the collective algorithms: the simulator's oracle.

Not a second simulator: each formula is the critical path of the algorithm on a contention-free
fabric where every rank injects at ``beta`` bytes/s and every step costs ``alpha`` seconds, plus
one ``launch`` per collective. ``S`` is the nccl-tests size (bytes of the larger buffer), ``n``
the world size, ``c`` the pipeline chunks:

====================  ==================  ======================================================
algorithm             collective          time - launch
====================  ==================  ======================================================
ring                  all_reduce          2(n-1) (alpha + S/(n beta))
ring                  reduce_scatter,     (n-1) (alpha + S/(n beta))
                      all_gather
ring                  broadcast, reduce   (n-2+c) (alpha + S/(c beta))      (a pipelined chain)
direct                all_gather,         alpha + (n-1) S/(n beta)          (all peers at once)
                      reduce_scatter,
                      all_to_all
direct                all_reduce          2 alpha + 2(n-1) S/(n beta)
nvls                  all_reduce          alpha_switch + S (1 + 1/n) / (beta eff)
any                   send_recv           alpha + S/beta
====================  ==================  ======================================================

On a uniform, contention-free switched topology ``scaleup.sim.simulate`` agrees with these
(tests/sim/test_sim_cost_oracle.py, which derives ``launch``, ``alpha`` and ``beta`` from the
simulator's parameters). The oracle takes them as arguments and imports nothing of the simulator,
so it is not built from what it checks.

>>> round(time_s("ring", "all_reduce", 8, 8e9, alpha_s=0.0, beta_bytes_per_s=1e9), 3)
14.0
"""

from __future__ import annotations

from scaleup.errors import UnsupportedCollective

__all__ = ["time_s"]


def time_s(
    algorithm: str,
    collective: str,
    nranks: int,
    nbytes: float,
    *,
    alpha_s: float,
    beta_bytes_per_s: float,
    launch_s: float = 0.0,
    chunks: int = 1,
    switch_alpha_s: float | None = None,
    switch_efficiency: float = 1.0,
) -> float:
    """Closed-form time of ``algorithm`` for ``collective`` (see the module table).

    Parameters
    ----------
    algorithm, collective
        Names as in :mod:`scaleup.collectives.algorithms` and :mod:`scaleup.collectives.spec`.
    nranks
        World size.
    nbytes
        nccl-tests size column, bytes.
    alpha_s
        Latency of one step (one op along the dependency chain), seconds.
    beta_bytes_per_s
        Injection bandwidth of one rank, bytes/s.
    launch_s
        Per-collective launch latency, seconds.
    chunks
        Pipeline depth of chain algorithms.
    switch_alpha_s, switch_efficiency
        Latency and link efficiency of one in-switch reduction (nvls).
    """
    n, s, a, b = int(nranks), float(nbytes), float(alpha_s), float(beta_bytes_per_s)
    if n == 1:
        return launch_s
    key = (algorithm, collective)
    if collective == "send_recv":
        body = a + s / b
    elif key == ("ring", "all_reduce"):
        body = 2 * (n - 1) * (a + s / (n * b))
    elif key in (("ring", "reduce_scatter"), ("ring", "all_gather")):
        body = (n - 1) * (a + s / (n * b))
    elif algorithm == "ring" and collective in ("broadcast", "reduce"):
        c = max(int(chunks), 1)
        body = (n - 2 + c) * (a + s / (c * b))
    elif algorithm == "direct" and collective in ("all_gather", "reduce_scatter", "all_to_all"):
        body = a + (n - 1) * s / (n * b)
    elif key == ("direct", "all_reduce"):
        body = 2 * a + 2 * (n - 1) * s / (n * b)
    elif key == ("nvls", "all_reduce"):
        alpha = a if switch_alpha_s is None else switch_alpha_s
        body = alpha + s * (1 + 1 / n) / (b * switch_efficiency)
    else:
        raise UnsupportedCollective(
            f"no closed form for {algorithm} {collective}", source=algorithm
        )
    return launch_s + body
