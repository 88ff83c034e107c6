"""exporter.compat.pytree through nodes registered the old way (a flatten_fn, no
flatten_with_keys_fn), as diffusers registers its BaseOutput dataclasses: keys derived from the
node's own flatten, torch's registry untouched. Private torch API used: torch.utils._pytree's
SUPPORTED_NODES, _get_node_type, NodeDef fields, MappingKey/GetAttrKey/SequenceKey."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict

import pytest
import torch
from torch.utils import _pytree

from exporter import compat
from exporter.compat import key_path_to_str


class OldStyleDict(OrderedDict):
    """Like diffusers' BaseOutput: an OrderedDict subclass flattened by torch's _dict_flatten."""


@dataclasses.dataclass
class OldStyleFields:
    sample: torch.Tensor
    extra: torch.Tensor | None = None


class OldStyleOpaque:
    def __init__(self, *tensors):
        self.tensors = tensors


@pytest.fixture(scope="module", autouse=True)
def old_style_nodes():
    # serialized names: torch's _deregister_pytree_node needs one
    _pytree.register_pytree_node(OldStyleDict, _pytree._dict_flatten,
                                 lambda values, context: OldStyleDict(zip(context, values)),
                                 serialized_type_name="test.OldStyleDict")
    _pytree.register_pytree_node(
        OldStyleFields, lambda node: ([f for f in (node.sample, node.extra) if f is not None], node.extra is None),
        lambda values, no_extra: OldStyleFields(*values), serialized_type_name="test.OldStyleFields")
    _pytree.register_pytree_node(OldStyleOpaque, lambda node: (list(node.tensors), None),
                                 lambda values, _: OldStyleOpaque(*values), serialized_type_name="test.OldStyleOpaque")
    yield
    for cls in (OldStyleDict, OldStyleFields, OldStyleOpaque):
        _pytree._deregister_pytree_node(cls)


def test_torch_itself_refuses_key_paths_through_an_old_style_node():
    # what this module works around; when torch derives keys itself, this starts failing
    with pytest.raises(ValueError, match="Did not find a flatten_with_keys_fn"):
        _pytree.tree_flatten_with_path(OldStyleDict(sample=torch.ones(1)))
    assert _pytree.SUPPORTED_NODES[OldStyleDict].flatten_with_keys_fn is None


def test_a_mapping_node_gets_its_keys_and_a_dataclass_node_its_field_names():
    a, b, c = torch.ones(1), torch.ones(2), torch.ones(3)
    value = {"out": OldStyleDict(sample=a, latent=b), "fields": OldStyleFields(c), "opaque": OldStyleOpaque(a, b)}
    flat = compat.tree_flatten_with_path(value)
    assert [key_path_to_str("o", path) for path, _ in flat] == [
        "o.out.sample", "o.out.latent", "o.fields.sample", "o.opaque.0", "o.opaque.1"]
    assert [leaf for _, leaf in flat] == _pytree.tree_leaves(value)  # tree_flatten's order, for the spec
    assert compat.pytree_keystr(flat[0][0]) == "['out']['sample']"
    assert compat.pytree_keystr(flat[2][0]) == "['fields'].sample"
    assert compat.pytree_keystr(flat[3][0]) == "['opaque'][0]"


def test_a_dataclass_whose_flatten_skips_a_none_field_names_the_ones_it_gives():
    extra = torch.ones(2)
    flat = compat.tree_flatten_with_path(OldStyleFields(torch.ones(1), extra))
    assert [key_path_to_str("", path) for path, _ in flat] == [".sample", ".extra"] and flat[1][1] is extra


def test_keys_of_old_style_node_falls_back_to_positions_when_the_children_are_not_the_fields():
    node = OldStyleFields(torch.ones(1))
    keys = compat.keys_of_old_style_node(node, [torch.zeros(1)], None)  # not node.sample
    assert keys == [_pytree.SequenceKey(0)]


def test_is_leaf_and_pytree_children_go_through_old_style_nodes():
    a = torch.ones(1)
    value = [OldStyleDict(sample=a)]
    assert compat.tree_flatten_with_path(value, is_leaf=lambda node: isinstance(node, OldStyleDict)) == [
        ((_pytree.SequenceKey(0),), value[0])]
    assert compat.pytree_children(value[0]) == [("sample", a)]


def test_the_registry_is_left_as_it_was():
    before = dict(_pytree.SUPPORTED_NODES)
    compat.tree_flatten_with_path(OldStyleDict(sample=torch.ones(1)))
    assert _pytree.SUPPORTED_NODES == before and _pytree.SUPPORTED_NODES[OldStyleDict].flatten_with_keys_fn is None


def test_output_paths_name_an_old_style_output_by_its_keys():
    class Model(torch.nn.Module):
        def forward(self, x):
            return OldStyleDict(sample=x + 1, latent=x * 2)

    program = torch.export.export(Model(), (torch.ones(2),), strict=False)
    assert compat.output_paths(program) == ["sample", "latent"]


def test_diffusers_outputs_flatten_with_their_field_names():
    outputs = pytest.importorskip("diffusers.models.unets.unet_2d")
    node = _pytree.SUPPORTED_NODES[outputs.UNet2DOutput]
    assert node.flatten_with_keys_fn is None  # registered the old way
    sample = torch.ones(1)
    assert compat.tree_flatten_with_path(outputs.UNet2DOutput(sample=sample)) == [
        ((_pytree.MappingKey("sample"),), sample)]
    assert _pytree.SUPPORTED_NODES[outputs.UNet2DOutput] is node
