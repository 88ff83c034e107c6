"""The structural twin every job runs instead of the user's module (exporter.model_twin): same
outputs and classes, the same weight storage under new Parameter objects, and nothing a job does
to it (rebinding, in-place writes to buffers, containers, children, hooks) reaches the user's."""

from __future__ import annotations

import functools
import os
import types
import weakref

import pytest
import torch

from exporter.model_twin import is_twin, twin_of, user_module_of

os.environ.setdefault("HF_HUB_OFFLINE", "1")


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.norm = torch.nn.BatchNorm1d(4)
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.table = torch.arange(4.0)  # a plain tensor attribute
        self.alias = self.steps  # one tensor under two names
        self.sizes = [1, 2]
        self.named = {"first": self.linear}
        self.parent = weakref.ref(self.linear)
        self.scale = 2.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.steps += 1
        self.sizes.append(x.shape[0])
        return self.norm(self.linear(x)) * self.scale + self.table


class Tied(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight
        self.shared = torch.nn.Linear(4, 4)
        self.again = self.shared  # one module under two names

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.again(self.shared(self.embed(ids))))


def test_twin_gives_the_models_outputs_with_the_same_classes():
    model = Block().eval()
    x = torch.randn(3, 4)
    twin = twin_of(model)
    assert type(twin) is Block and type(twin.linear) is torch.nn.Linear and isinstance(twin.norm, torch.nn.BatchNorm1d)
    assert twin is not model and twin.linear is not model.linear
    with torch.no_grad():
        assert torch.equal(twin(x), Block.forward(twin_of(model), x))
        assert torch.equal(twin_of(model)(x), model(x))
    assert is_twin(twin) and not is_twin(model) and user_module_of(twin) is model and user_module_of(model) is model


def test_twin_shares_weight_storage_under_new_parameter_objects():
    model = Block()
    model.linear.weight.requires_grad_(False)
    model.linear.weight.note = "mine"  # an attribute on a Parameter is kept
    twin = twin_of(model)
    for (name, param), (twin_name, twin_param) in zip(model.named_parameters(), twin.named_parameters()):
        assert name == twin_name
        assert twin_param is not param and type(twin_param) is torch.nn.Parameter
        assert twin_param.data_ptr() == param.data_ptr()  # no weight copied
        assert twin_param.requires_grad == param.requires_grad
    assert twin.linear.weight.note == "mine"
    # buffers are cloned: a job's in-place write never reaches the user's tensors
    for (_, buffer), (_, twin_buffer) in zip(model.named_buffers(), twin.named_buffers()):
        assert twin_buffer is not buffer and twin_buffer.data_ptr() != buffer.data_ptr()
        assert torch.equal(twin_buffer, buffer)
    assert twin.alias is twin.steps  # an alias stays an alias
    assert twin.table is not model.table and torch.equal(twin.table, model.table)


def test_a_job_running_and_changing_the_twin_leaves_the_model_untouched():
    model = Block().train()
    before = {name: value.clone() for name, value in model.state_dict().items()}
    attributes = {id(m): dict(vars(m)) for m in model.modules()}
    sizes, named = list(model.sizes), dict(model.named)
    twin = twin_of(model)
    twin(torch.randn(5, 4))  # batch norm's running statistics, a counter, a list: all written in place
    twin.scale = 3.0
    twin.named["second"] = twin.norm
    twin.linear.weight = torch.nn.Parameter(torch.zeros(4, 4))
    twin._modules["extra"] = torch.nn.ReLU()
    twin.register_buffer("added", torch.ones(1))
    twin.register_forward_hook(lambda *_: None)
    del twin._parameters  # even torch's own bookkeeping is the twin's
    assert model.sizes == sizes and model.named == named and model.scale == 2.0
    for name, value in model.state_dict().items():
        assert torch.equal(value, before[name]), name
    for module in model.modules():
        assert vars(module) == attributes[id(module)]
    assert not model._forward_hooks


def test_containers_tensors_modules_and_weak_references_point_into_the_twin():
    model = Block()
    twin = twin_of(model)
    assert twin.named["first"] is twin.linear  # a module in a dict: the twin's
    assert twin.parent() is twin.linear
    assert twin.sizes == model.sizes and twin.sizes is not model.sizes
    lstm = torch.nn.LSTM(3, 4)
    lstm_twin = twin_of(lstm)
    # LSTM's forward reads _flat_weights, a list holding the parameters: the twin's parameters
    assert all(a is b for a, b in zip(lstm_twin._flat_weights, lstm_twin._parameters.values()))
    x = torch.randn(5, 2, 3)
    with torch.no_grad():
        assert torch.equal(lstm_twin(x)[0], lstm(x)[0])


def test_a_forward_replaced_on_the_instance_runs_on_the_twin_not_on_the_users_module():
    def scaled_forward(module, x):
        module.seen = getattr(module, "seen", 0) + 1
        return module.linear(x) * 2

    def wrapped_forward(module, x, *, extra):  # as accelerate's add_hook_to_module leaves it
        module.seen = getattr(module, "seen", 0) + 1
        return module._old_forward(x) + extra

    bound = Block().eval()
    bound.forward = types.MethodType(scaled_forward, bound)
    hooked = Block().eval()
    hooked._old_forward = hooked.forward
    hooked.forward = functools.partial(wrapped_forward, hooked, extra=1.0)
    x = torch.randn(2, 4)
    for model in (bound, hooked):
        twin = twin_of(model)
        with torch.no_grad():
            assert torch.equal(twin(x), model(x))
        assert model.seen == 1 and twin.seen == 1  # each call counted on the module that ran it
        assert twin.steps.item() == model.steps.item()


def test_tied_weights_and_shared_modules_are_twinned_once():
    model = Tied()
    twin = twin_of(model)
    assert twin.head.weight is twin.embed.weight and twin.head.weight is not model.embed.weight
    assert twin.again is twin.shared and twin.shared is not model.shared
    assert len(list(twin.parameters())) == len(list(model.parameters()))
    ids = torch.randint(0, 10, (2, 3))
    with torch.no_grad():
        assert torch.equal(twin(ids), model(ids))


def test_hooks_are_kept_on_the_twin_but_the_recorders_own_are_not():
    from exporter.recording import record

    model = Block().eval()
    calls = []
    model.register_forward_hook(lambda module, args, output: calls.append(module))
    with record(model) as rec:
        twin = twin_of(model)
        with torch.no_grad():
            twin(torch.randn(2, 4))
        model(torch.randn(3, 4))
    assert calls == [twin, model]  # the user's hook sees both calls, with the module that ran
    assert len(rec.recording.calls) == 1  # the recording holds the user's own call only


def test_a_transformers_model_twin_shares_its_config_and_gives_the_same_logits():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    twin = twin_of(model)
    assert twin.config is model.config and twin.generation_config is model.generation_config
    assert twin.lm_head.weight is twin.model.embed_tokens.weight
    ids = torch.randint(0, 64, (1, 5))
    with torch.no_grad():
        assert torch.equal(twin(ids).logits, model(ids).logits)


def test_anything_but_a_module_is_returned_as_it_is():
    def function(x):
        return x

    assert twin_of(function) is function
    scripted = torch.jit.script(torch.nn.Linear(2, 2))
    assert twin_of(scripted) is scripted and not is_twin(scripted)


def test_a_model_whose_twin_cannot_be_built_is_returned_as_it_is(monkeypatch):
    from exporter import model_twin

    def refuses(tensor, memo):
        raise NotImplementedError("this tensor subclass cannot be cloned")

    monkeypatch.setattr(model_twin, "_twin_tensor", refuses)
    model = Block()
    assert twin_of(model) is model and not is_twin(model)
