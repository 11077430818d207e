"""The model catalog: published sizes, aliases, user files and their errors."""

from __future__ import annotations

import pytest

from scaleup.errors import SpecFileError
from scaleup.workload.models import ModelSpec, get_model, list_models, load_model_file

CATALOG = [m.name for m in list_models()]


@pytest.mark.parametrize("name", CATALOG)
def test_parameter_count_within_one_percent_of_published(name: str) -> None:
    spec = get_model(name)
    assert spec.published_params is not None
    assert spec.params == pytest.approx(spec.published_params, rel=0.01)
    if spec.published_active_params is not None:
        assert spec.active_params == pytest.approx(spec.published_active_params, rel=0.01)
    assert spec.sources, "every catalog model names its sources"


def test_required_models_and_aliases() -> None:
    for alias, name in [
        ("llama-8b", "llama-3-8b"),
        ("llama-70b", "llama-3-70b"),
        ("llama-405b", "llama-3-405b"),
        ("gpt-3-175b", "gpt-3-175b"),
        ("mixtral-8x7b", "mixtral-8x7b"),
        ("LLAMA-70B", "llama-3-70b"),
    ]:
        assert get_model(alias).name == name
    moe = get_model("mixtral-8x7b")
    assert (moe.experts, moe.top_k, moe.is_moe) == (8, 2, True)


def test_hand_counted_tiny_model() -> None:
    tiny = ModelSpec(
        name="tiny", layers=2, hidden=64, heads=4, ffn=256, vocab=1000, gated_mlp=False
    )
    # per layer: attention 4*64^2 = 16384, MLP 2*64*256 = 32768, two RMSNorms 128
    # embedding 1000*64, output head 1000*64 + final norm 64
    assert tiny.layer_params == 16384 + 32768 + 128
    assert tiny.params == 2 * 49280 + 64000 + 64064 == 226624


def test_gqa_and_gated_mlp_counts() -> None:
    m = get_model("llama-8b")
    assert m.kv_dim == 1024
    assert m.attention_params_per_layer == 2 * 4096**2 + 2 * 4096 * 1024
    assert m.expert_params == 3 * 4096 * 14336


def _write(tmp_path, text: str):
    path = tmp_path / "my.toml"
    path.write_text(text)
    return path


def test_user_model_file(tmp_path) -> None:
    path = _write(
        tmp_path,
        """
[models.my-1b]
aliases = ["mine"]
layers = 16
hidden = 2048
heads = 16
ffn = 8192
vocab = 32000
""",
    )
    spec = get_model("mine", model_file=path)
    assert spec.name == "my-1b"
    assert spec.n_kv_heads == 16


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        (
            "layers = 0\nhidden = 64\nheads = 4\nffn = 1\nvocab = 1",
            "layers: Input should be greater than 0",
        ),
        ("layers = 1\nhidden = 65\nheads = 4\nffn = 1\nvocab = 1", "multiple of heads"),
        (
            "layers = 1\nhidden = 64\nheads = 4\nffn = 1\nvocab = 1\ncolour = 3",
            "colour: Extra inputs",
        ),
        ("layers = 1\nhidden = 64\nheads = 4\nffn = 1\nvocab = 1\nexperts = 2\ntop_k = 3", "top_k"),
        ("layers = 1\nhidden = 64\nheads = 4\nffn = 1", "vocab: Field required"),
    ],
)
def test_bad_model_file_names_file_entry_and_rule(tmp_path, body: str, rule: str) -> None:
    path = _write(tmp_path, "[models.bad]\n" + body + "\n")
    with pytest.raises(SpecFileError) as info:
        load_model_file(path)
    line = info.value.one_line()
    assert "\n" not in line
    assert str(path) in line
    assert "models.bad" in line
    assert rule in line


def test_unreadable_and_malformed_files(tmp_path) -> None:
    with pytest.raises(SpecFileError, match="cannot read"):
        load_model_file(tmp_path / "missing.toml")
    with pytest.raises(SpecFileError, match="not valid TOML"):
        load_model_file(_write(tmp_path, "[models.x\n"))
    with pytest.raises(SpecFileError, match="no \\[models"):
        load_model_file(_write(tmp_path, "[models]\n"))


def test_unknown_model_suggests() -> None:
    with pytest.raises(SpecFileError, match="did you mean.*llama-70b"):
        get_model("llama-71b")
