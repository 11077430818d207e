"""NCCL's environment variables read with NCCL's syntax (tune/nccl_env.py) and their narrowing
of a BenchRequest."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scaleup.collectives.algorithms import ALGORITHMS
from scaleup.collectives.spec import PROTOCOL_NAMES
from scaleup.errors import ScaleupError, UsageError
from scaleup.tune import BenchRequest
from scaleup.tune.nccl_env import NCCL_ALGO_NAMES, NCCL_PROTO_NAMES, read_nccl_env
from scaleup.tune.rules import Candidate


def test_nothing_set_is_no_restriction():
    env = read_nccl_env({"PATH": "/bin"})
    assert (env.algorithms, env.protocols, env.min_channels, env.max_channels) == (None,) * 4
    assert env.applied == {}


def test_inclusion_is_case_insensitive_and_maps_names():
    env = read_nccl_env({"NCCL_ALGO": "RING,nvlsTree", "NCCL_PROTO": "ll128, Simple"})
    assert env.algorithms == {"ring", "nvls_tree"}
    assert env.protocols == {"ll128", "simple"}


def test_tree_keeps_the_hierarchical_composition():
    assert read_nccl_env({"NCCL_ALGO": "Tree"}).algorithms == {"tree", "hierarchical"}


def test_exclusion_keeps_the_rest_including_ours():
    env = read_nccl_env({"NCCL_ALGO": "^NVLS,NVLSTree", "NCCL_PROTO": "^LL"})
    assert env.algorithms == set(ALGORITHMS) - {"nvls", "nvls_tree"}
    assert env.protocols == {"simple", "ll128"}


def test_unmodelled_names_are_accepted_for_exclusion_and_alongside_others():
    assert read_nccl_env({"NCCL_ALGO": "^PAT,CollnetDirect"}).algorithms == set(ALGORITHMS)
    assert read_nccl_env({"NCCL_ALGO": "collnetchain,ring"}).algorithms == {"ring"}


def test_only_unmodelled_names_is_an_error_naming_the_variable():
    with pytest.raises(UsageError, match="does not model") as info:
        read_nccl_env({"NCCL_ALGO": "CollnetDirect,PAT"})
    assert info.value.source == "NCCL_ALGO"


def test_nvls_enable_zero_removes_nvls():
    assert read_nccl_env({"NCCL_NVLS_ENABLE": "0"}).algorithms == set(ALGORITHMS) - {
        "nvls",
        "nvls_tree",
    }
    assert read_nccl_env({"NCCL_NVLS_ENABLE": "1"}).algorithms is None
    with pytest.raises(UsageError) as info:
        read_nccl_env({"NCCL_NVLS_ENABLE": "0", "NCCL_ALGO": "NVLS"})
    assert info.value.source == "NCCL_ALGO"


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("NCCL_ALGO", "foo"),
        ("NCCL_ALGO", ""),
        ("NCCL_ALGO", "^"),
        ("NCCL_PROTO", "LL256"),
        ("NCCL_PROTO", "^simple,ll,ll128"),
        ("NCCL_MIN_NCHANNELS", "x"),
        ("NCCL_MAX_NCHANNELS", "0"),
        ("NCCL_MAX_NCHANNELS", "100000"),
        ("NCCL_NVLS_ENABLE", "yes"),
        ("NCCL_LL128_C2C", "2"),
        ("NCCL_TUNER_PLUGIN", "libnccl-tuner-example.so"),
        ("OFI_NCCL_TUNER_TYPE", "Model"),
        ("OFI_NCCL_TUNER_TYPE", "regions"),
    ],
)
def test_bad_values_name_their_variable(var, value):
    with pytest.raises(UsageError) as info:
        read_nccl_env({var: value})
    assert info.value.source == var
    assert "\n" not in info.value.one_line()


def test_ll128_c2c_reads_zero_and_one():
    assert read_nccl_env({}).ll128_c2c is True
    assert read_nccl_env({"NCCL_LL128_C2C": "1"}).ll128_c2c is True
    assert read_nccl_env({"NCCL_LL128_C2C": " 0 "}).ll128_c2c is False


def test_net_tuner_on_by_default_off_by_none_or_internal():
    assert read_nccl_env({}).net_tuner is True
    assert read_nccl_env({"NCCL_TUNER_PLUGIN": "libnccl-tuner-ofi.so"}).net_tuner is True
    assert read_nccl_env({"OFI_NCCL_TUNER_TYPE": "region"}).net_tuner is True
    assert read_nccl_env({"NCCL_TUNER_PLUGIN": "NONE"}).net_tuner is False
    assert read_nccl_env({"OFI_NCCL_TUNER_TYPE": "Internal"}).net_tuner is False


def test_min_above_max_is_refused():
    with pytest.raises(UsageError) as info:
        read_nccl_env({"NCCL_MIN_NCHANNELS": "8", "NCCL_MAX_NCHANNELS": "4"})
    assert info.value.source == "NCCL_MIN_NCHANNELS"


def test_without_drops_variables():
    env = read_nccl_env({"NCCL_ALGO": "ring", "NCCL_PROTO": "ll"}).without("NCCL_ALGO")
    assert env.algorithms is None
    assert env.protocols == {"ll"}


_algo_names = st.lists(st.sampled_from(sorted(NCCL_ALGO_NAMES)), min_size=1, max_size=4)


@given(names=_algo_names, exclude=st.booleans(), upper=st.booleans())
def test_exclusion_and_inclusion_partition_the_modelled_names(names, exclude, upper):
    text = ",".join(n.upper() if upper else n for n in names)
    listed = {a for n in names for a in NCCL_ALGO_NAMES[n]}
    excluded = read_nccl_env({"NCCL_ALGO": "^" + text}).algorithms
    assert excluded == set(ALGORITHMS) - listed
    if listed:
        assert read_nccl_env({"NCCL_ALGO": text}).algorithms == listed


@given(names=st.lists(st.sampled_from(sorted(NCCL_PROTO_NAMES)), min_size=1, max_size=3))
def test_protocol_lists(names):
    env = read_nccl_env({"NCCL_PROTO": ",".join(names)})
    assert env.protocols == set(names)
    if set(names) != set(PROTOCOL_NAMES):
        rest = read_nccl_env({"NCCL_PROTO": "^" + ",".join(names)}).protocols
        assert rest == set(PROTOCOL_NAMES) - set(names)


def test_request_clamps_counts_and_narrows():
    request = BenchRequest(min_channels=3, max_channels=6, protocols=frozenset({"ll"}))
    assert request.clamp_counts((1, 2, 4, 8, 16)) == (3, 4, 6)
    cands = [Candidate("ring", "ll", 4), Candidate("ring", "simple", 4)]
    assert request.narrow(cands) == [Candidate("ring", "ll", 4)]
    with pytest.raises(UsageError) as info:
        BenchRequest(algorithms=frozenset({"nvls"})).narrow(cands)
    assert info.value.source == "algorithms"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("algorithms", frozenset({"bogus"})),
        ("protocols", frozenset()),
        ("min_channels", 0),
        ("max_channels", 10**6),
    ],
)
def test_request_checks_the_narrowing_fields(field, value):
    with pytest.raises(ScaleupError) as info:
        BenchRequest(**{field: value})
    assert info.value.source == field
