"""Property: an exception at any point of a run that changed a module tree, inside
exporter.model_state.preserved, leaves vars() of every module (its config included) equal to
before: attributes added, removed, rebound; lists, dicts, a FrozenDict config, a
MappingProxyType, an OrderedDict subclass and a config object changed in place; parameters,
buffers, submodules and hooks added, replaced, removed; requires_grad flipped."""

from __future__ import annotations

import dataclasses
import types
from collections import OrderedDict

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.model_state import preserved

from module_fingerprint import modules_state

FrozenDict = pytest.importorskip("diffusers.configuration_utils").FrozenDict


class _Ordered(OrderedDict):
    pass


@dataclasses.dataclass
class _Config:
    hidden: int = 4
    names: list = dataclasses.field(default_factory=lambda: ["a"])


class _Boom(Exception):
    pass


def _tree():
    torch.manual_seed(0)
    root = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2)))
    root._internal_dict = FrozenDict(sample_size=16, block_out_channels=[16, 32], act_fn="silu")
    root.config = _Config()
    underneath = {"a": 1}
    inner = root[1][0]
    inner.table = types.MappingProxyType(underneath)
    inner.sizes = [1, 2]
    inner.options = {"k": [1], "f": len}
    inner.ordered = _Ordered(x=1)
    return root, types.SimpleNamespace(under=underneath, inner=inner)


# --- the mutations: (model, its parts, module picked, a number) -> None ----------


def _module(root, pick):
    modules = list(root.modules())  # modules added by earlier mutations included
    return modules[pick % len(modules)]


def _new_attribute(root, ctx, m, n):
    setattr(m, f"added_{n}", n)


def _toggle_mode(root, ctx, m, n):
    m.train(not m.training)


def _delete_attribute(root, ctx, m, n):
    for name in ("sizes", "options", "table", "ordered", "_internal_dict", "config", "in_features"):
        if name in vars(m):
            delattr(m, name)
            return


def _list_in_place(root, ctx, m, n):
    sizes = vars(ctx.inner).get("sizes")
    if isinstance(sizes, list):
        (sizes.append, lambda v: sizes.__setitem__(0, v) if sizes else sizes.append(v), lambda v: sizes.clear())[n % 3](n)


def _dict_in_place(root, ctx, m, n):
    options = vars(ctx.inner).get("options")
    if isinstance(options, dict):
        if n % 3 == 0:
            options["k"].append(n)
        elif n % 3 == 1:
            options[f"new_{n}"] = n
        else:
            options.pop("f", None)


def _frozen_config(root, ctx, m, n):
    config = vars(root).get("_internal_dict")
    if not isinstance(config, FrozenDict):
        return
    if n % 4 == 0:
        OrderedDict.__setitem__(config, "sample_size", n)
    elif n % 4 == 1:
        config.clear()  # FrozenDict allows it
    elif n % 4 == 2:
        channels = dict.get(config, "block_out_channels")
        if isinstance(channels, list):
            channels.append(n)
    else:
        root._internal_dict = dict(config)  # rebound to an equal dict of another type


def _proxy(root, ctx, m, n):
    if n % 2:
        ctx.under[f"k{n}"] = n
    else:
        ctx.inner.table = types.MappingProxyType({"a": n})


def _ordered(root, ctx, m, n):
    ordered = vars(ctx.inner).get("ordered")
    if isinstance(ordered, _Ordered):
        ordered[f"y{n}"] = n
        ordered.move_to_end("x")


def _config_object(root, ctx, m, n):
    config = vars(root).get("config")
    if isinstance(config, _Config):
        (lambda: setattr(config, "hidden", n), lambda: config.names.append(n), lambda: setattr(config, "extra", n))[n % 3]()


def _parameters(root, ctx, m, n):
    if n % 5 == 0:
        m.register_parameter(f"p{n}", torch.nn.Parameter(torch.ones(1)))
    elif "weight" in m._parameters:
        if n % 5 == 1:
            m.weight = torch.nn.Parameter(torch.zeros_like(m.weight))
        elif n % 5 == 2:
            m.weight.data = torch.zeros(3)
        elif n % 5 == 3:
            m.weight.requires_grad_(False)
        else:
            del m._parameters["weight"]


def _buffers(root, ctx, m, n):
    if n % 4 == 0:
        m.register_buffer(f"b{n}", torch.ones(1), persistent=bool(n % 8))
    elif "running_mean" in m._buffers:
        if n % 4 == 1:
            m.running_mean.add_(n)
        elif n % 4 == 2:
            m.running_mean = torch.full((2,), float(n))
        else:
            del m._buffers["running_mean"]


def _submodules(root, ctx, m, n):
    if n % 3 == 0:
        added = torch.nn.Linear(1, 1)
        m.add_module(f"m{n}", added)
        added.register_buffer("inside", torch.zeros(1))  # inside a newly added submodule
        added.note = [n]
    elif n % 3 == 1 and m._modules:
        m._modules[next(iter(m._modules))] = torch.nn.Identity()
    elif m._modules:
        del m._modules[next(iter(m._modules))]


def _hooks(root, ctx, m, n):
    if n % 2:
        m.register_forward_hook(lambda *_: None)
    else:
        m.register_forward_pre_hook(lambda *_: None)


MUTATIONS = [_new_attribute, _toggle_mode, _delete_attribute, _list_in_place, _dict_in_place, _frozen_config,
             _proxy, _ordered, _config_object, _parameters, _buffers, _submodules, _hooks]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(st.sampled_from(MUTATIONS), st.integers(0, 50), st.integers(0, 100)), max_size=12),
       raise_at=st.integers(0, 12))
def test_an_exception_anywhere_in_a_changing_run_leaves_every_module_and_its_config_as_before(steps, raise_at):
    root, ctx = _tree()
    modules = list(root.modules())
    before = modules_state(modules)
    config_json = dict(root._internal_dict)
    with pytest.raises(_Boom), preserved(root) as report:
        for index, (mutation, pick, number) in enumerate(steps):
            if index == raise_at:
                raise _Boom
            mutation(root, ctx, _module(root, pick), number)
        raise _Boom
    assert modules_state(modules) == before
    assert list(root.modules()) == modules
    assert type(root._internal_dict) is FrozenDict and dict(root._internal_dict) == config_json
    assert report.all_restored, report.message


def test_the_fingerprint_sees_each_kind_of_change():
    # the property above is only as good as this comparison: each mutation, on every module of a
    # fresh tree, is seen
    for mutation in MUTATIONS:
        for number in range(3, 11):
            root, ctx = _tree()
            modules = list(root.modules())
            before = modules_state(modules)
            for module in modules:
                mutation(root, ctx, module, number)
            assert modules_state(modules) != before, (mutation.__name__, number)
