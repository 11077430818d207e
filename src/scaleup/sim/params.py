"""Every parameter of the simulator's cost model, each with its reason and its source.

The model is physical: a transfer's time is latency (per op, per hop, per protocol step) plus
bytes over a max-min fair share of the channels it crosses, where each channel's capacity is the
catalog's raw link rate times the efficiencies below. Nothing here is fitted to a measured row of
the calibration set; where a figure is an estimate the comment says so. docs/models.md explains
each parameter at length.

Sources quoted as "NCCL" are NVIDIA/nccl @5067397c (src/graph/topo.h, tuning.cc, search.cc), as
summarised in the project's prior-art survey §4; "RCCL" is ROCm/rccl @0cbce2a7 (src/graph/tuning.cc,
rome_models.cc). Latency constants are the vendor library's own: NCCL's for NVIDIA systems, RCCL's
for AMD systems (the "library constants" section).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

__all__ = [
    "ARCH_ALIASES",
    "CTA_BYTES_PER_S",
    "NVLS_TREE_BUS_BYTES_PER_S",
    "FORWARD_HBM_ACCESSES",
    "HBM_EFFICIENCY",
    "HOST_MEMORY_EFFICIENCY",
    "HOST_STAGED_ACCESSES",
    "HOST_STAGING_LATENCY_S",
    "KERNEL_LAUNCH_S",
    "LAUNCH_LATENCY_S",
    "LINK_EFFICIENCY",
    "LOCAL_COPY_HBM_ACCESSES",
    "MAX_ECMP_FANOUT",
    "NCCL_ARCH_ROW",
    "NCCL_BASE_LATENCY_S",
    "NCCL_GRAPH_CHANNEL_BUS_GB_PER_S",
    "NCCL_HW_LATENCY_S",
    "NCCL_NET_OVERHEAD_CPU_S",
    "NCCL_NET_OVERHEAD_S",
    "NVLS_EFFICIENCY",
    "NVLS_RESULT_VIA_ISSUER",
    "PAYLOAD_EFFICIENCY",
    "PCIE_DLLP_EFFICIENCY",
    "PCIE_TLP_EFFICIENCY",
    "RCCL_BASE_LATENCY_S",
    "RCCL_HW_LATENCY_S",
    "RCCL_NET_OVERHEAD_S",
    "RCCL_TUNING_SET",
    "REDUCE_HBM_ACCESSES",
    "STEP_LATENCY_ROW",
    "STEP_LATENCY_S",
    "SWITCH_STEP_LATENCY_S",
    "VIRTUAL_HOST_SOCKETS",
]

# ---------------------------------------------------------------------------- link efficiency
#: Fraction of a link's raw per-direction rate that carries payload, per link technology (on top
#: of the catalog's ``encoding_efficiency``, which covers line coding such as 128b/130b).
#:
#: NVLink: NCCL's own per-link model (topo.h) is SM60 18.0, SM70 20.0, SM80 20.0, SM90 20.6,
#: SM100 40.1 GB/s per link against raw rates of 20/25/25/25/50 GB/s. The gap is NVLink's packet
#: format (a header flit and byte-enable/CRC overhead per request, 16-byte flits carrying up to
#: 256 B of data, plus response/credit traffic in the reverse direction) and what one GPU's copy
#: engines/SMs sustain; the NCCL maintainer puts it as "450 GB/s is the line rate. With the
#: protocol overhead (~20%) NCCL can get an effective NVLink bandwidth of 370 GB/s"
#: (NVIDIA/nccl-tests #212). 18 x 20.6 = 370.8 GB/s is the measured 8xH100 ring ceiling
#: (365-370 GB/s busbw, NVIDIA/nccl #1455, #2140).
#:
#: PCIe: see :data:`PCIE_TLP_EFFICIENCY` x :data:`PCIE_DLLP_EFFICIENCY`.
#:
#: xGMI: ESTIMATE. AMD publishes no payload efficiency; Infinity Fabric carries 64 B requests in
#: flits with headers and CRC much like NVLink; taken at NVLink's ~0.8 less AMD's
#: larger response share: 0.75. (MI300X rccl-tests reach ~315 GB/s busbw on 7 x 64 GB/s.)
#:
#: UALink: 1.0 here because the catalog's ``encoding_efficiency`` already holds the consortium's
#: "93% effective peak bandwidth" (flit/protocol efficiency of the 200G data rate).
#:
#: InfiniBand / Ethernet: NCCL reaches 46-48 GB/s per 400G (50 GB/s) NIC (NVIDIA/nccl-tests
#: #290, #267): 0.95 (transport headers, 4 KiB MTU).
LINK_EFFICIENCY: Final = MappingProxyType(
    {
        "nvlink1": 18.0 / 20.0,
        "nvlink2": 20.0 / 25.0,
        "nvlink3": 20.0 / 25.0,
        "nvlink4": 20.6 / 25.0,
        "nvlink5": 40.1 / 50.0,
        "nvlink6": 40.1 / 50.0,  # ESTIMATE: NVLink5's measured ratio; no Rubin measurement yet
        "c2c": 20.6 / 25.0,  # NVLink-C2C uses NVLink-style packets; NVLink4 ratio (ESTIMATE)
        "xgmi": 0.75,
        "ualink": 1.0,
        "infiniband": 0.95,
        "ethernet": 0.95,
        "socket": 0.8,  # UPI/xGMI socket link: ESTIMATE, coherent-fabric flit overhead like xGMI
    }
)

#: PCIe TLP payload efficiency: 256 B max payload per TLP against ~24 B of TLP header (12-16 B),
#: sequence number, LCRC and framing: 256 / (256 + 24) = 0.914 (PCI-SIG base spec layout).
PCIE_TLP_EFFICIENCY: Final = 256.0 / (256.0 + 24.0)
#: PCIe data-link overhead: ACK/NAK and flow-control DLLPs and, for DMA reads, the read-request
#: TLPs flowing the other way take ~8% (ESTIMATE). With 128b/130b and the TLP factor it gives
#: 0.985 x 0.914 x 0.92 = 0.83 of raw, matching measured host links: H200 H2D 52 of 64 GB/s
#: (Azure ND H200 v5 nvbandwidth), A100 H2D 26.3 of 32 GB/s (Azure ND A100 v4).
PCIE_DLLP_EFFICIENCY: Final = 0.92

# ---------------------------------------------------------------------------- memories
#: Achievable fraction of peak HBM bandwidth for streaming copies: STREAM-like Copy 4.01 TB/s of
#: 4.8 TB/s on H200 (Azure ND H200 v5 results) = 0.835; A100 1.61 of 2.04 TB/s = 0.79. 0.83.
HBM_EFFICIENCY: Final = 0.83
#: Achievable fraction of a host socket's DDR peak for streaming: ESTIMATE 0.8 (STREAM on DDR5
#: servers typically reaches 75-85% of the channel rate).
HOST_MEMORY_EFFICIENCY: Final = 0.8
#: HBM accesses per byte of a reduction at the reducing device: it reads two operands (the
#: incoming data and its own) and writes one result. (The incoming stream is consumed from the
#: receive FIFO, assumed L2-resident at NCCL's chunk sizes, so it is not counted as a 4th access.)
REDUCE_HBM_ACCESSES: Final = 3.0
#: HBM accesses per byte of a local copy (read + write on the same device).
LOCAL_COPY_HBM_ACCESSES: Final = 2.0
#: HBM accesses per byte an intermediate accelerator forwards on a mesh (DGX-1: NVLink does not
#: route through a GPU, so the data is stored then re-sent: one write, one read).
FORWARD_HBM_ACCESSES: Final = 2.0
#: Host-memory accesses per staged byte: the device->host copy writes it, the host->device copy
#: reads it (the degraded, no-peer-access path).
HOST_STAGED_ACCESSES: Final = 2.0

# ---------------------------------------------------------------------------- protocols
#: Payload bytes per byte stored on the wire, per NCCL protocol. LL: every 8-byte store carries
#: 4 bytes of data and a 4-byte flag (0.5). LL128: each 128-byte line carries 120 bytes of data
#: and 8 of flags (120/128). Simple: data moves in bulk and a separate flag per chunk (~1.0).
PAYLOAD_EFFICIENCY: Final = MappingProxyType({"simple": 1.0, "ll": 0.5, "ll128": 120.0 / 128.0})

# ---------------------------------------------------------------------------- library constants
# The latency tables of the collective library each vendor ships, as the library states them
# (microseconds in the sources, seconds here), indexed [algorithm][protocol] and, for hardware
# latencies, [link class]. NVIDIA systems run NCCL, AMD systems RCCL (:func:`scaleup.sim.protocols
# .library_for` picks one from the catalog's accelerator vendor).
#
# NCCL: NVIDIA/nccl @5067397c (tag nccl4py-v0.3.1, 2026-06-11), src/graph/tuning.cc,
# ``ncclTunerConstantsDefaults``: baseLatencies lines 149-155, hwLatencies lines 156-176 (NVLINK
# rows 158-161, PCI 164-167, NET 170-173), getNetOverhead lines 228-233.
# RCCL: ROCm/rccl @0cbce2a7 (2024-10-24, rocm-test-09212024-66-g0cbce2a7), src/graph/tuning.cc:
# baseLat lines 57-60, per-platform ``tuningModel`` sets 0-5 (hwLat at lines 77-81, 107-111,
# 137-141, 167-171, 197-201, 227-231), getNetOverhead lines 294-301 (2 us on AMD x86 CPUs, tripled
# for Simple at line 449), the ring latency with it lines 445-452; the platform set comes from
# RCCL's node model (src/graph/rome_models.cc ``tuning=`` option, e.g. 8 x MI300X with 7 xGMI
# links: rome_model_79 line 559 and, with 8 NICs, rome_model_81 line 815, both ``tuning=5``).


#: The protocol order of the libraries' tables: {LL, LL128, Simple}.
PROTOCOL_ORDER: Final = ("ll", "ll128", "simple")


def _us(
    table: dict[str, tuple[float, float, float]],
) -> MappingProxyType[str, MappingProxyType[str, float]]:
    """{algorithm: (LL, LL128, Simple) in us} -> {algorithm: {protocol: seconds}}; each value is
    the double nearest the decimal figure (``6.6`` us -> ``6.6e-6`` s, as a literal would be)."""
    return MappingProxyType(
        {
            algo: MappingProxyType(
                {name: float(f"{us!r}e-6") for name, us in zip(PROTOCOL_ORDER, row, strict=True)}
            )
            for algo, row in table.items()
        }
    )


#: NCCL baseLatencies (tuning.cc lines 150-153): per collective, per (algorithm, protocol).
NCCL_BASE_LATENCY_S: Final = _us(
    {
        "tree": (6.8, 14.0, 8.4),
        "ring": (6.6, 14.0, 8.4),
        "collnet_direct": (0.0, 0.0, 0.0),
        "collnet_chain": (0.0, 0.0, 0.0),
        "nvls": (0.0, 0.0, 0.0),
        "nvls_tree": (0.0, 0.0, 0.0),
        "pat": (8.0, 8.0, 8.0),
    }
)
#: NCCL hwLatencies (tuning.cc lines 156-176): per step, per link class (NVLINK, PCI, NET).
NCCL_HW_LATENCY_S: Final = MappingProxyType(
    {
        "nvlink": _us(
            {
                "tree": (0.6, 1.25, 4.0),
                "ring": (0.6, 1.9, 3.4),
                "collnet_direct": (0.0, 0.0, 3.7),
                "collnet_chain": (0.0, 0.0, 2.8),
                "nvls": (0.0, 0.0, 25.0),
                "nvls_tree": (0.0, 0.0, 25.0),
                "pat": (0.0, 0.0, 4.0),
            }
        ),
        "pci": _us(
            {
                "tree": (1.0, 1.9, 4.0),
                "ring": (1.0, 2.5, 5.7),
                "collnet_direct": (0.0, 0.0, 3.7),
                "collnet_chain": (0.0, 0.0, 2.8),
                "nvls": (0.0, 0.0, 0.0),
                "nvls_tree": (0.0, 0.0, 0.0),
                "pat": (0.0, 0.0, 4.0),
            }
        ),
        "net": _us(
            {
                "tree": (5.0, 8.5, 14.0),
                "ring": (2.7, 4.0, 14.0),
                "collnet_direct": (0.0, 0.0, 31.0),
                "collnet_chain": (0.0, 0.0, 30.0),
                "nvls": (0.0, 0.0, 18.0),
                "nvls_tree": (0.0, 0.0, 20.9),
                "pat": (0.0, 0.0, 14.0),
            }
        ),
    }
)
#: NCCL getNetOverhead (tuning.cc lines 228-233): 1 us on Intel x86, 2 us on AMD x86 CPUs, 1 us
#: on other CPUs; tripled for Simple (line 408). A multi-node ring pays max(intra-node hwLat, it)
#: on every intra-node step (lines 404-412), per protocol here. The catalog does not name the host
#: CPU, so NCCL's non-AMD value (1 us) is used: it raises the NVLink LL step (0.6 -> 1.0 us) and
#: leaves LL128 (1.9) and Simple (3.4 > 3.0) as they are.
NCCL_NET_OVERHEAD_CPU_S: Final = MappingProxyType({"intel": 1.0e-6, "amd": 2.0e-6, "other": 1.0e-6})
NCCL_NET_OVERHEAD_S: Final = MappingProxyType(
    {
        "ll": NCCL_NET_OVERHEAD_CPU_S["other"],
        "ll128": NCCL_NET_OVERHEAD_CPU_S["other"],
        "simple": 3.0 * NCCL_NET_OVERHEAD_CPU_S["other"],
    }
)

#: RCCL baseLat (tuning.cc lines 57-60): the same for every platform set.
RCCL_BASE_LATENCY_S: Final = _us(
    {
        "tree": (12.0, 12.0, 17.0),
        "ring": (12.0, 12.0, 17.0),
        "collnet_direct": (12.0, 12.0, 17.0),
        "collnet_chain": (12.0, 12.0, 17.0),
        "nvls": (0.0, 0.0, 0.0),
        "nvls_tree": (0.0, 0.0, 0.0),
    }
)
#: RCCL hwLat of the platform sets the catalog's AMD parts use ({set: {class: {algo: ...}}}); the
#: "nvlink" slot is RCCL's NCCL_HW_NVLINK row, which RCCL fills with xGMI latencies. A 0.0 entry
#: means the set does not tune that protocol (LL128 is off on those platforms); the simulator
#: then uses set 0's entry (RCCL's generic set) rather than a free step.
RCCL_HW_LATENCY_S: Final = MappingProxyType(
    {
        0: MappingProxyType(  # tuning_model_0, lines 77-81: RCCL's default (no node model)
            {
                "nvlink": _us({"tree": (0.8, 1.4, 2.5), "ring": (0.8, 2.2, 3.6)}),
                "pci": _us({"tree": (2.2, 2.2, 5.7), "ring": (2.2, 2.2, 5.7)}),
                "net": _us({"tree": (11.8, 18.2, 20.8), "ring": (9.5, 19.8, 15.1)}),
            }
        ),
        1: MappingProxyType(  # tuning_model_1, lines 107-111: 16 x MI250X GCD (rome_model_56)
            {
                "nvlink": _us({"tree": (1.5, 1.5, 4.5), "ring": (1.5, 1.5, 4.5)}),
                "pci": _us({"tree": (2.2, 2.2, 5.7), "ring": (2.2, 2.2, 5.7)}),
                "net": _us({"tree": (33.0, 33.0, 15.8), "ring": (5.1, 5.1, 68.8)}),
            }
        ),
        4: MappingProxyType(  # tuning_model_4, lines 197-201: 16 GCDs + 8 NICs (models 59/65)
            {
                "nvlink": _us({"tree": (0.8, 1.4, 2.5), "ring": (0.8, 2.2, 3.6)}),
                "pci": _us({"tree": (2.2, 2.2, 5.7), "ring": (2.2, 2.2, 5.7)}),
                "net": _us({"tree": (32.2, 34.4, 47.6), "ring": (35.4, 87.8, 209.2)}),
            }
        ),
        5: MappingProxyType(  # tuning_model_5, lines 227-231: 8 x MI300X (models 79/81/84)
            {
                "nvlink": _us({"tree": (0.9, 0.0, 2.3), "ring": (0.8, 0.0, 2.1)}),
                "pci": _us({"tree": (2.2, 2.2, 5.7), "ring": (2.2, 2.2, 5.7)}),
                "net": _us({"tree": (10.5, 0.0, 25.0), "ring": (9.5, 0.0, 320.0)}),
            }
        ),
    }
)
#: RCCL platform set per (AMD architecture, spans several nodes): the set of the node model RCCL
#: matches for the catalog's node shape (rome_models.cc): 8 x MI300X with 7 xGMI links is
#: rome_model_79 (no NIC, line 559) / rome_model_81 (8 NICs, line 815), both ``tuning=5``;
#: 16 MI250X GCDs with 4 xGMI links is rome_model_56 (no NIC, ``tuning=1``, line 376) /
#: rome_model_59 and _65 (8 NICs, ``tuning=4``, lines 403, 442). CDNA4 (MI355X) has no node model
#: in this RCCL snapshot: ESTIMATE, the MI300X set (same 8-GPU, 7-link full mesh). Others: set 0.
RCCL_TUNING_SET: Final = MappingProxyType(
    {
        ("cdna3", False): 5,
        ("cdna3", True): 5,
        ("cdna4", False): 5,
        ("cdna4", True): 5,
        ("cdna2", False): 1,
        ("cdna2", True): 4,
    }
)
#: RCCL getNetOverhead (tuning.cc lines 294-301): 2 us per step on AMD x86 hosts, x3 for Simple
#: (line 449); a multi-node ring pays max(intra-node step, overhead) on every intra-node step
#: (lines 446-452). RCCL's node models are AMD EPYC platforms ("rome" models), so AMD hosts.
RCCL_NET_OVERHEAD_S: Final = MappingProxyType({"ll": 2.0e-6, "ll128": 2.0e-6, "simple": 6.0e-6})
#: Which algorithm row of a library's hwLat table is the simulator's per-step latency of a link
#: class (the simulator charges one step latency per op, whatever the algorithm). NCCL: the Ring
#: row everywhere (as before). RCCL: Ring intra-node; across the network the Tree row, because
#: RCCL's Ring NET Simple entries (68.8 us in set 1, 209.2 in set 4, 320 in set 5) are not step
#: costs but steer its selection away from multi-node Ring/Simple, while the Tree NET row holds
#: per-hop figures (10.5-33 us).
STEP_LATENCY_ROW: Final = MappingProxyType(
    {
        "nccl": MappingProxyType({"nvlink": "ring", "pci": "ring", "net": "ring"}),
        "rccl": MappingProxyType({"nvlink": "ring", "pci": "ring", "net": "tree"}),
    }
)

#: Per-collective launch and setup latency (kernel launch, channel setup, first synchronisation),
#: seconds, per protocol, for NVIDIA systems: NCCL baseLatencies for Ring {LL 6.6, LL128 14.0,
#: Simple 8.4} us (:data:`NCCL_BASE_LATENCY_S`). AMD systems: :data:`RCCL_BASE_LATENCY_S`.
LAUNCH_LATENCY_S: Final = NCCL_BASE_LATENCY_S["ring"]

#: Host-side cost of one collective as nccl-tests measures it without CUDA graphs (its ``time``
#: column is per-iteration wall time of stream-launched collectives): cudaLaunchKernel + NCCL's
#: enqueue, paid on every call and the same for every algorithm (so NCCL's tuner leaves it out).
#: 3.0 us is the stream- vs graph-launched difference of a 1 KiB all_reduce on 4 x H800
#: (NVIDIA/nccl #1984: 3.5 vs 0.5 us); launch + sync of a short kernel is 4-6 us. Taken: 4 us.
KERNEL_LAUNCH_S: Final = 4.0e-6

#: Per-step synchronisation latency (the receiver's flag poll and the sender's wait for buffer
#: credit, one per op along a dependency chain), seconds, per link class and protocol, for NVIDIA
#: systems: NCCL hwLatencies for Ring (:data:`NCCL_HW_LATENCY_S`), NVLINK {LL 0.6, LL128 1.9,
#: Simple 3.4} us, PCI {1.0, 2.5, 5.7}, NET {2.7, 4.0, 14.0}. Scale-up links other than NVLink
#: (xGMI, UALink, C2C) use the NVLINK row. The route's own hardware latency (links, switches) is
#: added on top; NCCL's figures include the ~0.4 us of an NVSwitch path, so small messages may be
#: ~0.4 us per step pessimistic. AMD systems: :data:`RCCL_HW_LATENCY_S` (see
#: :func:`scaleup.sim.protocols.for_library`).
STEP_LATENCY_S: Final = MappingProxyType(
    {
        **{cls: NCCL_HW_LATENCY_S[cls]["ring"] for cls in ("nvlink", "pci", "net")},
        "local": MappingProxyType({"ll": 0.0, "ll128": 0.0, "simple": 0.0}),
    }
)
#: Latency of one in-switch reduction op (NVLS: multimem.ld_reduce then multimem.st, both round
#: trips through the switch plus the group synchronisation): NCCL tuning.cc hwLatencies NVLS
#: Simple = 25 us (NVLS is Simple-only).
SWITCH_STEP_LATENCY_S: Final = NCCL_HW_LATENCY_S["nvlink"]["nvls"]["simple"]
#: Extra latency of a host-staged transfer (device->host copy, flag in host memory, host->device
#: copy): ESTIMATE 1 us, a host-memory round trip plus a PCIe posted write and a read.
HOST_STAGING_LATENCY_S: Final = 1.0e-6

#: Most payload one NCCL channel (one thread block on one SM) moves per second, by GPU
#: architecture and protocol. Simple: the highest per-channel speed NCCL's ring search tries
#: (search.cc sm90SpeedArrayIntra[0] = 60, sm100SpeedArrayIntra[0] = 90, speedArrayIntra[0] = 40
#: GB/s for older parts). LL128: tuning.cc perChMaxRingLL128Bws (Volta/Ampere 20, Hopper 36.7,
#: Blackwell 40 GB/s). LL: half the Simple figure, because half of every store is a flag. The
#: cap is a per-(rank, channel) constraint shared by the ops a channel runs at once.
#: AMD CDNA3 (MI300X): RCCL drives one xGMI link per ring channel, and AMD measures a channel on a
#: link at "approximately 48 GB/s per link" of the 64 GB/s raw (rocm.blogs.amd.com, "Understanding
#: RCCL Bandwidth and xGMI Performance on AMD Instinct MI300X", 2025-03-02,
#: /software-tools-optimization/mi300x-rccl-xgmi): Simple 48 GB/s, LL half of it, LL128 120/128 of
#: it. CDNA2 and CDNA4 have no AMD per-channel figure in a source read here: the "default" row.
CTA_BYTES_PER_S: Final = MappingProxyType(
    {
        "default": MappingProxyType({"simple": 40e9, "ll128": 20e9, "ll": 20e9}),
        "hopper": MappingProxyType({"simple": 60e9, "ll128": 36.7e9, "ll": 30e9}),
        "blackwell": MappingProxyType({"simple": 90e9, "ll128": 40e9, "ll": 45e9}),
        "cdna3": MappingProxyType({"simple": 48e9, "ll128": 45e9, "ll": 24e9}),
    }
)
#: NCCL's per-channel throughput caps of its cost model, in bus GB/s per *graph* channel, by
#: (algorithm, protocol), architecture row (:data:`NCCL_ARCH_ROW`) and node count (one, two,
#: more): tuning.cc ``perChMaxRingLL128Bws``, ``perChMaxTreeLL128Bws`` and ``perChMaxTreeBws``
#: (NVIDIA/nccl @5067397c lines 184-204; the Hopper rows are the same in v2.28.7-1, lines
#: 175-192, the version of the p5 rows). NCCL multiplies them by ``graphs[a]->nChannels``
#: (lines 305-308: ring LL128; tree all_reduce at any protocol; tree LL128), the search's
#: channels, and ``ncclTopoPostset`` then runs each graph channel on two thread blocks
#: (src/graph/connect.cc line 452: ``nChannels = min(MAXCHANNELS, nChannels*2)``; a tree's
#: second copy runs the other tree of the pair). So one cap is shared by the thread blocks a
#: graph channel is copied onto (:mod:`scaleup.sim.graph_channels`). Across nodes they are below
#: what the channel's NIC carries (Hopper ring LL128: 36.7 of an NDR / p5 NIC's 50 GB/s; tree
#: LL128 29 and tree 36 beyond two nodes): NVIDIA's measured per-channel rates of those
#: algorithms over the network, which no link figure gives.
NCCL_GRAPH_CHANNEL_BUS_GB_PER_S: Final = MappingProxyType(
    {
        ("ring", "ll128"): ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7),
                            (40.0, 40.0, 40.0)),
        ("tree", "ll128"): ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0),
                            (55.6, 31.67, 20.0)),
        ("tree", "simple"): ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0),
                             (70.0, 42.8, 24.0)),
    }
)  # fmt: skip
#: Catalog architecture -> NCCL's compute-capability row (tuning.cc ``compCapIndex``: Volta,
#: Ampere, Hopper, Blackwell; older parts take Volta's, Ada Ampere's; "rubin": ESTIMATE,
#: Blackwell's until NCCL tunes Rubin).
NCCL_ARCH_ROW: Final = MappingProxyType(
    {"pascal": 0, "volta": 0, "ampere": 1, "ada": 1, "hopper": 2, "blackwell": 3, "rubin": 3}
)
#: Architecture names the catalog uses -> the row of :data:`CTA_BYTES_PER_S` and
#: :data:`NVLS_EFFICIENCY`.
ARCH_ALIASES: Final = MappingProxyType(
    # "rubin": ESTIMATE, Blackwell's per-channel rates and NVLS efficiency until NCCL tunes Rubin.
    {"hopper": "hopper", "blackwell": "blackwell", "rubin": "blackwell", "cdna3": "cdna3"}
)

# ---------------------------------------------------------------------------- in-switch reduction
#: Fraction of link bandwidth an in-switch reduction (NVLS) sustains: multimem.ld_reduce is a
#: read (request out, reduced response back) and the switch's reduction engines and multicast
#: replication do not keep the links full. NCCL tuning.cc nvlsEfficiency: Hopper 0.85,
#: Blackwell 0.74 (0 before Hopper: no NVLS). Applied as 1/efficiency bytes of link capacity per
#: byte of a switch_reduce.
NVLS_EFFICIENCY: Final = MappingProxyType({"hopper": 0.85, "blackwell": 0.74, "default": 0.85})
#: Most bus bandwidth one NVLS-Tree head sustains per NCCL channel across two servers, by
#: architecture: NCCL's tuning.cc perChMaxNVLSTreeBws (NVIDIA/nccl @5067397c lines 205-211,
#: from NCCL 2.28.3): Hopper 57.7, Blackwell 96 GB/s for two nodes. It is NVIDIA's figure for
#: what a head's tree leg (the reduce warps' send to the network, the broadcast warps' receive
#: from it: src/device/all_reduce.h, NVLS_TREE) moves when neither NVLink nor the NIC bounds it;
#: no hardware figure gives that rate. NCCL's model converts busBw to algbw by N / 2(N - 1)
#: (tuning.cc line 379), so one head moves its slice at ``rate x N / 2(N - 1)``
#: (:meth:`scaleup.sim.simulate.CompiledSchedule.tree_leg_caps`). Used like
#: :data:`CTA_BYTES_PER_S`'s LL128 row (the same table's perChMaxRingLL128Bws). Two servers
#: only: from three, NCCL's N4 figures (45.5 / 80) never bind, because each head's NIC carries
#: twice a two-node head's bytes and binds first (the simulated NIC; NCCL's own model takes
#: bwInter / 2 there, tuning.cc line 320), and a head's share of the leg then depends on its
#: place in the two trees.
NVLS_TREE_BUS_BYTES_PER_S: Final = MappingProxyType({"hopper": 57.7e9, "blackwell": 96e9})
#: Hopper/Blackwell NVLS semantics: the reduced result returns to the issuing GPU (multimem
#: .ld_reduce), which multicasts it (multimem.st); the switch does not forward a reduction into a
#: multicast by itself. So a switch_reduce of c bytes by N sources into M destinations moves
#: c up each source link, c down and c back up the issuer's link, and c down each destination
#: link. For an all_reduce of S bytes over N ranks each GPU link carries S(1 + 1/N) per direction
#: instead of the ring's 2S(N-1)/N, which is why NVLS busbw exceeds the link rate.
NVLS_RESULT_VIA_ISSUER: Final = True

# ---------------------------------------------------------------------------- routing
#: Most next hops a multipath route spreads over at one node (by bandwidth, then channel order).
#: Splitting at each hop in proportion to channel bandwidth (NVLink sprays over all links, switch
#: ECMP/adaptive routing over equal uplinks) needs no path enumeration; the cap only bounds the
#: coefficient count in very wide Clos planes (1024-accelerator UALink pods).
MAX_ECMP_FANOUT: Final = 64
#: When a topology has no host device but the host path is needed (``--no-p2p`` on a preset
#: without hosts), each server gets this many virtual CPU sockets (a two-socket server), the
#: accelerators split evenly over them, each joined by its catalog host link.
VIRTUAL_HOST_SOCKETS: Final = 2
