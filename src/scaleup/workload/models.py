"""The model catalog: decoder-only transformers (dense and mixture-of-experts) by their shapes.

A :class:`ModelSpec` is what the planner needs to know about a model: layers, hidden size,
attention heads and KV heads (grouped-query attention), MLP width (plain or gated/SwiGLU),
vocabulary, training sequence length, tied embeddings, and for MoE the number of experts and
how many each token is routed to. Parameter counts are computed from the shape (exactly, not
the ``12 L h^2`` rule of thumb), so that memory and FLOPs follow from one source of truth.

The catalog is ``models.toml`` (package data); users add their own models in a file of the
same form. Files are validated with pydantic; every rule broken is a one-line
:class:`~scaleup.errors.SpecFileError` naming the file, the entry and the rule.

>>> from scaleup.workload.models import get_model
>>> m = get_model("llama-70b")
>>> m.name, round(m.params / 1e9, 2)
('llama-3-70b', 70.55)
"""

from __future__ import annotations

import difflib
import functools
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from scaleup.errors import SpecFileError
from scaleup.files import parse_toml, read_text, validate
from scaleup.limits import MAX_MODEL_DIM

__all__ = [
    "ModelSpec",
    "get_model",
    "list_models",
    "load_model_file",
    "model_catalog",
    "parse_models",
]

_PACKAGED = "models.toml"


class ModelSpec(BaseModel):
    """One transformer, by its shape; parameter counts are derived properties.

    ``ffn`` is the MLP inner width (``4 h`` for GPT-3; for SwiGLU models the width of each of
    the three matrices). For MoE models every layer's MLP is ``experts`` copies of that MLP and
    each token goes through ``top_k`` of them. Every shape number is at most
    :data:`~scaleup.limits.MAX_MODEL_DIM`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = ""
    aliases: tuple[str, ...] = ()
    layers: int = Field(gt=0, le=MAX_MODEL_DIM)
    hidden: int = Field(gt=0, le=MAX_MODEL_DIM)
    heads: int = Field(gt=0, le=MAX_MODEL_DIM)
    kv_heads: int | None = Field(default=None, gt=0, le=MAX_MODEL_DIM)
    ffn: int = Field(gt=0, le=MAX_MODEL_DIM)
    vocab: int = Field(gt=0, le=MAX_MODEL_DIM)
    seq: int = Field(default=2048, gt=0, le=MAX_MODEL_DIM)
    tied_embeddings: bool = False
    gated_mlp: bool = True
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    bias: bool = False
    position: Literal["rope", "learned"] = "rope"
    experts: int = Field(default=1, gt=0, le=MAX_MODEL_DIM)
    top_k: int = Field(default=1, gt=0, le=MAX_MODEL_DIM)
    published_params: float | None = Field(default=None, gt=0)
    published_active_params: float | None = Field(default=None, gt=0)
    sources: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_shape(self) -> ModelSpec:
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")
        if self.heads % self.n_kv_heads:
            raise ValueError(
                f"heads ({self.heads}) must be a multiple of kv_heads ({self.n_kv_heads})"
            )
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) must be <= experts ({self.experts})")
        return self

    # ------------------------------------------------------------------ shape helpers
    @property
    def n_kv_heads(self) -> int:
        """KV heads (equal to ``heads`` for multi-head attention)."""
        return self.kv_heads if self.kv_heads is not None else self.heads

    @property
    def head_dim(self) -> int:
        """Width of one attention head, ``hidden / heads``."""
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        """Width of the K (or V) projection output, ``kv_heads * head_dim``."""
        return self.n_kv_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        """True for mixture-of-experts models (more than one expert per layer)."""
        return self.experts > 1

    # ------------------------------------------------------------------ parameter counts
    @property
    def attention_params_per_layer(self) -> int:
        """Q, K, V and output projections (plus biases when ``bias``)."""
        h, kv = self.hidden, self.kv_dim
        weights = 2 * h * h + 2 * h * kv
        biases = (2 * h + 2 * kv) if self.bias else 0
        return weights + biases

    @property
    def expert_params(self) -> int:
        """One MLP (one expert): 3 ``h x ffn`` matrices if gated, else 2 (plus biases)."""
        h, f = self.hidden, self.ffn
        weights = (3 if self.gated_mlp else 2) * h * f
        biases = ((2 if self.gated_mlp else 1) * f + h) if self.bias else 0
        return weights + biases

    @property
    def norm_params_per_layer(self) -> int:
        """Two norms per layer: RMSNorm has a scale, LayerNorm a scale and a shift."""
        return 2 * self.hidden * (2 if self.norm == "layernorm" else 1)

    @property
    def router_params_per_layer(self) -> int:
        """The MoE gate, ``hidden x experts`` (0 for dense models)."""
        return self.hidden * self.experts if self.is_moe else 0

    @property
    def dense_params_per_layer(self) -> int:
        """Parameters of one layer outside the experts (replicated across expert parallelism)."""
        return (
            self.attention_params_per_layer
            + self.norm_params_per_layer
            + self.router_params_per_layer
        )

    @property
    def expert_params_per_layer(self) -> int:
        """All experts of one layer (the MLP itself for a dense model)."""
        return self.experts * self.expert_params

    @property
    def embedding_params(self) -> int:
        """Input embedding (``vocab x hidden``) plus learned positions (``seq x hidden``)."""
        learned = self.seq * self.hidden if self.position == "learned" else 0
        return self.vocab * self.hidden + learned

    @property
    def output_params(self) -> int:
        """The output projection: 0 if tied to the embedding; the final norm is counted here."""
        final_norm = self.hidden * (2 if self.norm == "layernorm" else 1)
        head = 0 if self.tied_embeddings else self.vocab * self.hidden
        return head + final_norm

    @property
    def layer_params(self) -> int:
        """All parameters of one transformer layer."""
        return self.dense_params_per_layer + self.expert_params_per_layer

    @property
    def params(self) -> int:
        """Total parameters (what is stored and trained)."""
        return self.layers * self.layer_params + self.embedding_params + self.output_params

    @property
    def active_params(self) -> int:
        """Parameters a token passes through: only ``top_k`` experts per layer."""
        per_layer = self.dense_params_per_layer + self.top_k * self.expert_params
        return self.layers * per_layer + self.embedding_params + self.output_params

    @property
    def matmul_params_per_token(self) -> int:
        """Weights multiplied per token (active, less the embedding lookup, plus the LM head).

        The input embedding is a lookup (no FLOPs) and learned positions are an addition; the
        output projection multiplies ``vocab x hidden`` weights even when tied.
        """
        per_layer = self.attention_params_per_layer + self.top_k * self.expert_params
        per_layer += self.router_params_per_layer
        return self.layers * per_layer + self.vocab * self.hidden

    def to_dict(self) -> dict[str, Any]:
        """The shape plus the derived counts, for ``--json``."""
        data = self.model_dump(exclude={"sources"})
        data.update(params=self.params, active_params=self.active_params)
        return data


# ---------------------------------------------------------------------------- loading
def _first_error(error: ValidationError) -> str:
    """The first pydantic error as ``field: rule`` (or the model rule)."""
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def parse_models(data: Mapping[str, Any], *, source: str) -> dict[str, ModelSpec]:
    """Validate a parsed model file (``{"models": {name: {...}}}``) into specs by name.

    Aliases map to the same spec. Raises :class:`SpecFileError` naming ``source``, the entry
    (``models.<name>``) and the rule.
    """
    unknown = set(data) - {"models"}
    if unknown:
        raise SpecFileError(
            f"unknown top-level key {sorted(unknown)[0]!r} (expected [models.<name>])",
            source=source,
        )
    models = data.get("models")
    if not isinstance(models, Mapping) or not models:
        raise SpecFileError("no [models.<name>] table", source=source)
    out: dict[str, ModelSpec] = {}
    for name, body in models.items():
        entry = f"models.{name}"
        if not isinstance(body, Mapping):
            raise SpecFileError("must be a table of fields", source=source, entry=entry)
        spec = validate(
            ModelSpec,
            {**body, "name": name},
            SpecFileError,
            source,
            locate=functools.partial(_located, entry),
        )
        for key in (name, *spec.aliases):
            if key in out:
                raise SpecFileError(f"name or alias {key!r} used twice", source=source, entry=entry)
            out[key] = spec
    return out


def _located(entry: str, error: ValidationError) -> tuple[str | None, str]:
    """A model's schema error, named by its ``models.<name>`` entry."""
    return entry, _first_error(error)


def load_model_file(path: str | Path) -> dict[str, ModelSpec]:
    """Read and validate a user's model TOML file (same form as the packaged catalog)."""
    source = str(path)
    data = parse_toml(read_text(path, SpecFileError), SpecFileError, source)
    return parse_models(data, source=source)


@functools.cache
def model_catalog() -> dict[str, ModelSpec]:
    """The packaged catalog (``models.toml``), names and aliases -> spec; read once."""
    text = resources.files("scaleup.workload").joinpath(_PACKAGED).read_text(encoding="utf-8")
    return parse_models(tomllib.loads(text), source=_PACKAGED)


def list_models() -> list[ModelSpec]:
    """The catalog's models, each once (aliases folded), in file order."""
    seen: dict[str, ModelSpec] = {}
    for spec in model_catalog().values():
        seen.setdefault(spec.name, spec)
    return list(seen.values())


def get_model(name: str, *, model_file: str | Path | None = None) -> ModelSpec:
    """Look up a model by name or alias; a user's ``model_file`` is searched first.

    Raises :class:`SpecFileError` (source ``--model``) with close matches when unknown.
    """
    table = dict(model_catalog())
    if model_file is not None:
        table = {**table, **load_model_file(model_file)}
    key = name.strip().lower()
    for candidate, spec in table.items():
        if candidate.lower() == key:
            return spec
    close = difflib.get_close_matches(key, list(table), n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    known = ", ".join(sorted({s.name for s in table.values()}))
    raise SpecFileError(f"unknown model {name!r}{hint}; known: {known}", source="--model")
