"""exporter.model_state.preserved on what modules hold besides tensors: read-only configs
(diffusers' FrozenDict), MappingProxyType, OrderedDict subclasses, config objects, values
rebound to an equal value of another type; and what a run adds anywhere in the tree."""

from __future__ import annotations

import dataclasses
import types
from collections import OrderedDict

import pytest
import torch

from exporter.model_state import preserved


def _frozen_dict():
    return pytest.importorskip("diffusers.configuration_utils").FrozenDict


class _Refuses(OrderedDict):
    """An OrderedDict subclass that is read-only the way FrozenDict means to be."""

    def __setitem__(self, key, value):
        if getattr(self, "_frozen", False):
            raise TypeError("read-only")
        super().__setitem__(key, value)

    def update(self, *args, **kwargs):
        raise TypeError("read-only")

    def __delitem__(self, key):
        raise TypeError("read-only")


class _Plain(OrderedDict):
    """An OrderedDict subclass with the builtin's own mutators."""


def _with(**attributes) -> torch.nn.Module:
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    for name, value in attributes.items():
        setattr(model[0], name, value)
    return model


# -- FrozenDict ----------------------------------------------------------------------------


def test_a_frozen_dict_config_the_run_leaves_alone_is_kept_whole_and_is_no_change():
    # was: snapshotted as a plain dict, the type difference taken for a change, the FrozenDict
    # cleared and then refused update(): 0 keys left and a bare Exception
    FrozenDict = _frozen_dict()
    config = FrozenDict(sample_size=16, block_out_channels=(16, 32), act_fn="silu")
    model = _with(_internal_dict=config)
    with preserved(model) as report:
        model(torch.ones(1, 2))
    assert model[0]._internal_dict is config and dict(config) == {
        "sample_size": 16, "block_out_channels": (16, 32), "act_fn": "silu"}
    assert not report.changed


def test_a_frozen_dict_changed_in_place_is_not_mutated_back_but_replaced_by_an_equal_frozen_dict(monkeypatch):
    FrozenDict = _frozen_dict()
    config = FrozenDict(sample_size=16, act_fn="silu")
    model = _with(_internal_dict=config)
    for name in ("update", "clear", "pop", "__delitem__", "__setitem__", "setdefault", "__setattr__"):
        monkeypatch.setattr(FrozenDict, name, _refused(FrozenDict, name, config))  # the restore calls none on it
    with preserved(model) as report:
        OrderedDict.__setitem__(config, "sample_size", 8)  # what a careless run can do
        OrderedDict.__delitem__(config, "act_fn")
    restored = model[0]._internal_dict
    assert type(restored) is FrozenDict and dict(restored) == {"sample_size": 16, "act_fn": "silu"}
    assert restored.sample_size == 16 and restored.act_fn == "silu"  # FrozenDict's attributes too
    (change,) = report.changes
    assert change.path == "0._internal_dict" and change.restored
    assert "an equal FrozenDict put in its place" in str(change)


def _refused(cls, name, original):
    own = getattr(cls, name)

    def method(self, *args, **kwargs):
        if self is original:
            raise AssertionError(f"the restore called FrozenDict.{name} on the user's config")
        return own(self, *args, **kwargs)  # building a new FrozenDict may

    return method


def test_a_frozen_dict_rebound_to_an_equal_plain_dict_gets_the_frozen_dict_back():
    FrozenDict = _frozen_dict()
    config = FrozenDict(sample_size=16)
    model = _with(_internal_dict=config)
    with preserved(model) as report:
        model[0]._internal_dict = dict(config)
    assert model[0]._internal_dict is config
    (change,) = report.changes
    assert change.path == "0._internal_dict" and change.restored


def test_a_list_inside_a_frozen_dict_changed_in_place_is_refilled_and_the_frozen_dict_kept():
    FrozenDict = _frozen_dict()
    channels = [16, 32]
    config = FrozenDict(block_out_channels=channels)
    model = _with(_internal_dict=config)
    with preserved(model) as report:
        channels.append(64)
    assert model[0]._internal_dict is config and config["block_out_channels"] is channels and channels == [16, 32]
    assert report.changes[0].restored


# -- MappingProxyType ----------------------------------------------------------------------


def test_a_mapping_proxy_whose_dict_the_run_changed_is_replaced_by_an_equal_proxy():
    underneath = {"a": 1, "b": 2}
    proxy = types.MappingProxyType(underneath)
    model = _with(table=proxy)
    with preserved(model) as report:
        underneath["a"] = 10
        underneath["c"] = 3
    restored = model[0].table
    assert type(restored) is types.MappingProxyType and dict(restored) == {"a": 1, "b": 2}
    (change,) = report.changes
    assert change.restored and "an equal mappingproxy put in its place" in str(change)


def test_a_mapping_proxy_left_alone_or_rebound_is_the_same_object_afterwards():
    proxy = types.MappingProxyType({"a": 1})
    model = _with(table=proxy)
    with preserved(model) as report:
        pass
    assert model[0].table is proxy and not report.changed
    with preserved(model) as report:
        model[0].table = types.MappingProxyType({"a": 2})
    assert model[0].table is proxy and report.changes[0].after == "mappingproxy of 1"


# -- OrderedDict subclasses ----------------------------------------------------------------


def test_an_ordered_dict_subclass_with_the_builtin_mutators_is_refilled_in_place():
    table = _Plain(a=1, b=2)
    model = _with(table=table)
    with preserved(model) as report:
        table["a"] = 5
        table["new"] = 0
        del table["b"]
    assert model[0].table is table and list(table.items()) == [("a", 1), ("b", 2)]
    (change,) = report.changes
    assert change.before == "_Plain of 2" and change.after == "_Plain of 2" and change.restored


def test_a_read_only_ordered_dict_subclass_is_never_mutated_by_the_restore():
    table = _Refuses(a=1, b=2)
    table._frozen = True
    model = _with(table=table)
    with preserved(model) as report:
        OrderedDict.__setitem__(table, "a", 5)
    restored = model[0].table
    assert type(restored) is _Refuses and list(restored.items()) == [("a", 1), ("b", 2)] and restored._frozen
    assert dict(table) == {"a": 5, "b": 2}  # the run's object is left as the run made it
    assert report.changes[0].restored


def test_an_ordered_dict_with_reordered_keys_gets_its_order_back():
    table = OrderedDict(a=1, b=2)
    model = _with(table=table)
    with preserved(model):
        table.move_to_end("a")
    assert model[0].table is table and list(table) == ["a", "b"]


# -- values rebound to an equal value of another type --------------------------------------


def test_a_dict_rebound_to_an_equal_dict_of_another_type_gets_the_original_back_and_is_a_change():
    options = {"a": 1, "b": [1, 2]}
    model = _with(options=options)
    with preserved(model) as report:
        model[0].options = OrderedDict(options)
    assert model[0].options is options and type(model[0].options) is dict
    (change,) = report.changes
    assert change.path == "0.options" and change.restored


def test_a_dict_rebound_to_an_equal_dict_of_the_same_type_is_no_change():
    funcs = {"rotary": len}
    model = _with(funcs=funcs)
    with preserved(model) as report:
        model[0].funcs = {"rotary": len}
    assert model[0].funcs is funcs and not report.changed


def test_a_tuple_rebound_to_an_equal_list_is_a_change():
    model = _with(shift=(2, 2))
    with preserved(model) as report:
        model[0].shift = [2, 2]
    assert model[0].shift == (2, 2) and type(model[0].shift) is tuple
    assert str(report.changes[0]) == "`0.shift` (2, 2) → [2, 2]"


# -- config objects --------------------------------------------------------------------------


@dataclasses.dataclass
class _Config:
    hidden: int = 4
    names: list = dataclasses.field(default_factory=lambda: ["a"])


def test_a_config_object_gets_its_changed_attributes_back_in_place():
    config = _Config()
    names = config.names
    model = _with(config=config)
    with preserved(model) as report:
        config.hidden = 8
        config.names.append("b")
        config.added = True
    assert model[0].config is config and config.hidden == 4 and config.names is names and names == ["a"]
    assert not hasattr(config, "added")
    (change,) = report.changes
    assert change.path == "0.config" and change.before == "_Config" and change.restored


def test_a_config_shared_by_every_layer_is_restored_once_and_stays_shared():
    config = _Config()
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    model[0].config = model[1].config = config
    with preserved(model) as report:
        config.hidden = 8
    assert model[0].config is config and model[1].config is config and config.hidden == 4
    assert [c.path for c in report.changes] == ["0.config", "1.config"]


def test_a_transformers_config_flag_set_by_a_run_is_put_back():
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8)
    before = config.to_dict()
    model = _with(config=config)
    with preserved(model):
        config.use_cache = not config.use_cache
        config.output_hidden_states = True
    assert model[0].config is config and config.to_dict() == before


# -- additions and flags anywhere in the tree ------------------------------------------------


def test_parameters_buffers_and_submodules_a_run_adds_deep_in_the_tree_are_removed():
    model = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(2, 2)))
    inner = model[0][0]
    with preserved(model) as report:
        inner.extra = torch.nn.Parameter(torch.ones(1))
        inner.register_buffer("scratch", torch.ones(1), persistent=False)
        added = torch.nn.Linear(1, 1)
        added.register_buffer("counter", torch.zeros(()))
        model[0].add_module("added", added)
    assert set(dict(inner.named_parameters())) == {"weight", "bias"}
    assert list(inner.buffers()) == [] and "scratch" not in inner._non_persistent_buffers_set
    assert list(model[0]._modules) == ["0"]
    assert {(c.path, c.kind) for c in report.changes} >= {("0.0.extra", "parameter"), ("0.0.scratch", "buffer"),
                                                         ("0.added", "submodule")}


def test_a_hook_a_run_registers_is_removed():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    calls = []
    with preserved(model) as report:
        model[0].register_forward_hook(lambda *_: calls.append(1))
    model(torch.ones(1, 2))
    assert calls == [] and any(c.path == "0._forward_hooks" for c in report.changes)


def test_a_flipped_requires_grad_is_put_back_and_said_as_such():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    with preserved(model) as report:
        model.requires_grad_(False)
    assert all(p.requires_grad for p in model.parameters())
    assert {str(c) for c in report.changes} == {"`0.weight` requires_grad=True → requires_grad=False",
                                                "`0.bias` requires_grad=True → requires_grad=False"}


def test_a_restore_that_fails_is_reported_and_never_raises(monkeypatch):
    from exporter import model_state

    def broken(self):
        raise RuntimeError("cannot read")

    model = _with(table={"a": 1})
    monkeypatch.setattr(model_state._ModuleSnapshot, "_restore_containers", broken)
    with pytest.raises(KeyError, match="the run's own error"), preserved(model) as report:
        raise KeyError("the run's own error")
    failed = [c for c in report.changes if not c.restored]
    assert failed and "restoring failed: RuntimeError: cannot read" in str(failed[0])


class _Unprintable:
    def __repr__(self) -> str:
        raise ValueError("no repr")


def test_a_value_that_cannot_be_printed_does_not_stop_the_restore_of_the_attributes_after_it():
    model = _with(odd=_Unprintable(), shape=torch.Size([2, 3]), steps=1)
    odd = model[0].odd
    with preserved(model) as report:
        model[0].odd = _Unprintable()
        model[0].shape = torch.Size([4, 3])
        model[0].steps = 2
    assert model[0].odd is odd and model[0].shape == torch.Size([2, 3]) and model[0].steps == 1
    described = {c.path: str(c) for c in report.changes}
    assert "_Unprintable" in described["0.odd"]
    assert "torch.Size([2, 3])" in described["0.shape"]  # a tuple subclass by value, not "Size of 2"


def test_a_submodule_removed_and_put_back_keeps_its_place_in_forward_order():
    # put back at the end, a Sequential would run its first layer last
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    with preserved(model):
        del model._modules["0"]
        del model._modules["1"].__dict__["inplace"]
    assert list(model._modules) == ["0", "1", "2"] and model(torch.ones(4, 2)).shape == (4, 1)
    assert list(vars(model[1]))[-1] == "inplace"
