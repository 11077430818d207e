"""aws-ofi-nccl's platform environment: the NCCL sizes the EFA network plugin sets on AWS.

EFA runs only through the aws-ofi-nccl network plugin, and at initialisation the plugin sets
NCCL variables for the instance type it runs on (aws/aws-ofi-nccl v1.16.3 src/platform-aws.cpp,
``platform_data_map``), through ``env_manager::insert_envvars`` (line 585), which does not
overwrite a value the user set (include/nccl_ofi_environ.h line 40). NCCL reads them
afterwards, so they are NCCL's sizes on those instances:

- p4d.24xlarge / p4de.24xlarge (lines 75-102): ``NCCL_BUFFSIZE=8388608`` and
  ``NCCL_P2P_NET_CHUNKSIZE=524288``;
- p5 / p5e (``^p5(e?\\..*)``, lines 147-163): the same two, and ``NCCL_NVLSTREE_MAX_CHUNKSIZE``
  and ``NCCL_NVLS_CHUNKSIZE`` 524288. The plugin says why (lines 61-72): NCCL 2.19.3 cut
  NVLS-Tree's chunk to 64 KiB from four nodes on, which "drastically impacted performance on
  AWS"; 512 KiB "recovers from the regression", and the NVLS chunk is raised with it because
  NVLS-Tree's chunk cannot exceed it. Both NVLS variables are set since v1.9.0-aws, the
  buffer and p2p chunk since v1.16.0.

Modelled as the region tuner is (:mod:`scaleup.tune.ofi_tuner`): p5 / p5e is a group of H100 or
H200 whose servers reach the network through ``efa-400g`` NICs only, p4d / p4de one of A100 with
``efa-100g`` NICs (the catalog's NICs for those instances). Not modelled: p5en and p6 (no catalog
NIC for their EFA), ``NCCL_NET_FORCE_FLUSH=0`` (the simulator charges no flush).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from scaleup import hardware
from scaleup.topology import analysis
from scaleup.topology.model import Topology
from scaleup.tune.nccl_buffers import NcclBuffers

__all__ = ["P4D", "P5", "PLATFORM_BUFFERS", "ofi_platform", "plugin_buffers"]

#: Platform names, as the plugin's ``platform_data_map`` calls them.
P5: Final = "p5/p5e"
P4D: Final = "p4d/p4de"
#: Each platform's accelerators and the catalog NIC of its EFA.
_PLATFORMS: Final = {
    P5: (frozenset({"H100", "H200"}), "efa-400g"),
    P4D: (frozenset({"A100"}), "efa-100g"),
}
#: The sizes the plugin sets per platform (v1.16.3 src/platform-aws.cpp lines 85-86, 99-100,
#: 157-160).
PLATFORM_BUFFERS: Final = {
    P5: NcclBuffers(
        buffsize_bytes=8388608,
        p2p_net_chunk_bytes=524288,
        nvls_chunk_bytes=524288,
        nvls_tree_max_chunk_bytes=524288,
    ),
    P4D: NcclBuffers(buffsize_bytes=8388608, p2p_net_chunk_bytes=524288),
}


def ofi_platform(topology: Topology, ranks: Sequence[int] | None = None) -> str | None:
    """The AWS platform (:data:`P5`, :data:`P4D`) a group runs on: every rank one of the
    platform's accelerators, every NIC of the group's servers its EFA; None elsewhere.

    >>> from scaleup.topology import resolve_topology
    >>> ofi_platform(resolve_topology("2xdgx-h100:nic=efa-400g"))
    'p5/p5e'
    >>> ofi_platform(resolve_topology("2xdgx-h100")) is None  # InfiniBand: no plugin
    True
    """
    servers = set(analysis.rank_nodes(topology, ranks))
    nics = {d.type for d in topology.nics if d.node in servers}
    if len(nics) != 1:
        return None
    accs = topology.accelerators
    chosen = accs if ranks is None else [accs[int(r)] for r in ranks]
    names = {hardware.accelerator(a.type).name for a in chosen}
    for platform, (accelerators, nic) in _PLATFORMS.items():
        if nics == {nic} and names <= accelerators:
            return platform
    return None


def plugin_buffers(topology: Topology, ranks: Sequence[int] | None = None) -> NcclBuffers:
    """The sizes aws-ofi-nccl sets for the group's platform (:data:`PLATFORM_BUFFERS`); none
    set (NCCL's own rules) off AWS's EFA platforms.

    >>> from scaleup.topology import resolve_topology
    >>> plugin_buffers(resolve_topology("2xdgx-h100:nic=efa-400g")).simple_step_bytes
    1048576
    >>> plugin_buffers(resolve_topology("dgx-h100")) == NcclBuffers()
    True
    """
    platform = ofi_platform(topology, ranks)
    return NcclBuffers() if platform is None else PLATFORM_BUFFERS[platform]
