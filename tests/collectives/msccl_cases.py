"""Hand-written MSCCL XML for the tests, shaped like msccl-tools' output (no third-party files)."""

from __future__ import annotations


def step(s: int, kind: str, srcbuf: str = "i", srcoff: int = -1, dstbuf: str = "o",
         dstoff: int = -1, cnt: int = 1, depid: int = -1, deps: int = -1) -> str:  # fmt: skip
    """One ``<step>`` element, attributes in msccl-tools' order."""
    return (
        f'<step s="{s}" type="{kind}" srcbuf="{srcbuf}" srcoff="{srcoff}" dstbuf="{dstbuf}" '
        f'dstoff="{dstoff}" cnt="{cnt}" depid="{depid}" deps="{deps}" hasdep="0"/>'
    )


def algo(name: str, n: int, gpus: list[str], *, coll: str = "allreduce", proto: str = "Simple",
         nchunks: int | None = None, nchannels: int = 1, inplace: int = 0) -> str:  # fmt: skip
    """The ``<algo>`` document around ``gpus`` (each a ``<gpu>`` element's text)."""
    k = n if nchunks is None else nchunks
    return (
        f'<algo name="{name}" proto="{proto}" nchannels="{nchannels}" nchunksperloop="{k}" '
        f'ngpus="{n}" coll="{coll}" inplace="{inplace}">\n' + "\n".join(gpus) + "\n</algo>\n"
    )


def gpu(r: int, tbs: list[str], *, i: int, o: int, s: int = 0) -> str:
    return (
        f'  <gpu id="{r}" i_chunks="{i}" o_chunks="{o}" s_chunks="{s}">\n'
        + "\n".join(tbs)
        + ("\n  </gpu>")
    )


def tb(tb_id: int, send: int, recv: int, steps: list[str], chan: int = 0) -> str:
    body = "\n".join(f"      {x}" for x in steps)
    return f'    <tb id="{tb_id}" send="{send}" recv="{recv}" chan="{chan}">\n{body}\n    </tb>'


def ring_all_reduce(n: int, *, proto: str = "Simple", middle: str = "rrcs") -> str:
    """Out-of-place ring all_reduce with scaleup's ring structure: chunk j is block j.

    Rank r sends its input block r, reduces blocks r-1 .. r-n+1 into its output as they pass
    (``rrcs``; the last completes block r+1 and starts the all-gather), then copies blocks r ..
    r-n+2 on (``rcs``, the last one only received: ``r``). ``middle="rrs"`` forwards the partial
    sums of the reduce-scatter without storing them, as msccl-tools' optimised rings do.
    """
    gpus = []
    for r in range(n):
        steps = [step(0, "s", "i", r, "o", r)]
        for t in range(1, n):
            j = (r - t) % n
            steps.append(step(t, middle if t < n - 1 else "rrcs", "i", j, "o", j))
        for t in range(n - 1):
            j = (r - t) % n
            kind = "r" if t == n - 2 else "rcs"
            steps.append(step(n + t, kind, "o", j, "o", j))
        gpus.append(gpu(r, [tb(0, (r + 1) % n, (r - 1) % n, steps)], i=n, o=n))
    return algo("ring", n, gpus, proto=proto)


def allpairs_all_reduce(n: int) -> str:
    """In-place all-pairs all_reduce as RCCL's allreduce-allpairs files do it, for small n.

    Chunk r (of n) belongs to rank r: every rank sends chunk p to rank p, which gathers them in
    scratch and reduces them into its input (``re``); then rank p sends the sum of chunk p to
    every rank. One tb per peer; a local tb reduces after a ``nop`` per peer it waits for.
    """
    gpus = []
    for r in range(n):
        peers = [p for p in range(n) if p != r]
        tbs = []
        for t, p in enumerate(peers):
            slot = peers.index(p)
            tbs.append(tb(t, p, p, [
                step(0, "s", "i", p, "s", 0),
                step(1, "r", "s", 0, "s", slot),
                step(2, "s", "i", r, "i", r, depid=n - 1, deps=2 * (n - 1) - 1),
                step(3, "r", "i", p, "i", p),
            ]))  # fmt: skip
        local = [step(i, "nop", depid=t, deps=1) for i, t in enumerate(range(n - 1))]
        for i in range(n - 1):
            local.append(step(n - 1 + i, "re", "s", i, "i", r))
        tbs.append(tb(n - 1, -1, -1, local))
        gpus.append(gpu(r, tbs, i=n, o=0, s=n - 1))
    return algo("allpairs", n, gpus, inplace=1)
