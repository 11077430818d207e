"""The pydantic schema of ``catalog.toml`` and the cross-entry rules checked after it.

Split from :mod:`scaleup.hardware.catalog` (which loads, builds and looks up the catalog) so that
the file's shape -- every figure with its source, no unknown keys -- and the references between
entries (link technologies, unique device names) read on their own.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from scaleup.errors import CatalogFileError
from scaleup.hardware.links import LinkFamily, LinkScope

__all__: list[str] = []  # private to the hardware package: catalog.py is the public face


# --------------------------------------------------------------------------- pydantic schema
class _Entry(BaseModel):
    """Common rules: no unknown keys; every figure (number or optional number) has a source."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    sources: dict[str, str]

    #: Fields that are figures and therefore need a source (set per subclass).
    FIGURES: ClassVar[tuple[str, ...]] = ()

    @field_validator("sources")
    @classmethod
    def _non_empty(cls, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            if not text.strip():
                raise ValueError(f"source for {key!r} is empty")
        return value

    def missing_sources(self) -> list[str]:
        """Figures set in this entry (other than to their neutral default) without a source."""
        fields = type(self).model_fields
        return [
            f
            for f in self.FIGURES
            if f not in self.sources and getattr(self, f) not in (None, fields[f].default)
        ]


class _LinkModel(_Entry):
    family: LinkFamily
    scope: LinkScope
    bandwidth_gb_per_s: float = Field(gt=0)
    latency_s: float = Field(gt=0, lt=1e-3)
    encoding_efficiency: float = Field(default=1.0, gt=0, le=1)
    FIGURES: ClassVar[tuple[str, ...]] = ("bandwidth_gb_per_s", "latency_s", "encoding_efficiency")


class _AcceleratorModel(_Entry):
    vendor: str
    arch: str
    hbm_bytes: int = Field(gt=0)
    hbm_gb_per_s: float = Field(gt=0)
    link_tech: str | None = None
    link_count: int = Field(ge=0)
    host_link_tech: str
    peak_bf16_tflops: float = Field(gt=0)
    FIGURES: ClassVar[tuple[str, ...]] = (
        "hbm_bytes",
        "hbm_gb_per_s",
        "link_count",
        "peak_bf16_tflops",
    )


class _SwitchModel(_Entry):
    link_tech: str
    port_count: int = Field(gt=0)
    latency_s: float = Field(gt=0, lt=1e-3)
    in_switch_reduction: bool = False
    reduction_gb_per_s: float | None = Field(default=None, gt=0)
    FIGURES: ClassVar[tuple[str, ...]] = (
        "port_count",
        "latency_s",
        "in_switch_reduction",
        "reduction_gb_per_s",
    )


class _HostModel(_Entry):
    memory_gb_per_s: float = Field(gt=0)
    socket_link_tech: str
    latency_s: float = Field(gt=0, lt=1e-3)
    FIGURES: ClassVar[tuple[str, ...]] = ("memory_gb_per_s", "latency_s")


class _NicModel(_Entry):
    link_tech: str
    host_link_tech: str
    latency_s: float = Field(gt=0, lt=1e-3)
    reported_latency_s: float = Field(default=0.0, ge=0, lt=1e-3)
    FIGURES: ClassVar[tuple[str, ...]] = ("latency_s", "reported_latency_s")


class _CatalogModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    links: dict[str, _LinkModel]
    accelerators: dict[str, _AcceleratorModel]
    switches: dict[str, _SwitchModel]
    hosts: dict[str, _HostModel]
    nics: dict[str, _NicModel]


def _first_error(exc: ValidationError) -> tuple[str, str]:
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"]]
    entry = ".".join(loc[:2]) if len(loc) >= 2 else ".".join(loc) or "catalog"
    field = ".".join(loc[2:])
    msg = err["msg"]
    return entry, f"{field}: {msg}" if field else msg


def _check_references(model: _CatalogModel, source: str) -> None:
    links = model.links

    def need_link(entry: str, name: str | None, field: str) -> None:
        if name is not None and name not in links:
            raise CatalogFileError(
                f"{field} {name!r} is not a catalog link technology", source=source, entry=entry
            )

    for table in ("links", "accelerators", "switches", "hosts", "nics"):
        for name, item in getattr(model, table).items():
            missing = item.missing_sources()
            if missing:
                raise CatalogFileError(
                    f"no source for {', '.join(missing)}", source=source, entry=f"{table}.{name}"
                )
    for name, acc in model.accelerators.items():
        entry = f"accelerators.{name}"
        need_link(entry, acc.link_tech, "link_tech")
        need_link(entry, acc.host_link_tech, "host_link_tech")
        if (acc.link_tech is None) != (acc.link_count == 0):
            raise CatalogFileError(
                "link_count must be 0 exactly when link_tech is absent", source=source, entry=entry
            )
    for name, sw in model.switches.items():
        need_link(f"switches.{name}", sw.link_tech, "link_tech")
        if sw.reduction_gb_per_s is not None and not sw.in_switch_reduction:
            raise CatalogFileError(
                "reduction_gb_per_s given for a switch without in-switch reduction",
                source=source,
                entry=f"switches.{name}",
            )
    for name, host in model.hosts.items():
        need_link(f"hosts.{name}", host.socket_link_tech, "socket_link_tech")
    for name, nic in model.nics.items():
        need_link(f"nics.{name}", nic.link_tech, "link_tech")
        need_link(f"nics.{name}", nic.host_link_tech, "host_link_tech")
    seen: dict[str, str] = {}
    for table in ("accelerators", "switches", "hosts", "nics"):
        for name in getattr(model, table):
            if name in seen:
                raise CatalogFileError(
                    f"device name also used in {seen[name]}", source=source, entry=f"{table}.{name}"
                )
            seen[name] = table
