"""One user-frame rule for error messages, guard provenance and the first divergent node:
installed model code (transformers) is the user's; torch, onnx & co., numpy, the exporter
(but its example models) and the standard library are not."""

from __future__ import annotations

import importlib.util
import linecache
import os
import sysconfig

import pytest
import torch

import exporter
from exporter import AUTO, ExportOptions, Session
from exporter.compat.frames import is_user_file
from exporter.frames import source_of_stack, user_frame

SITE = os.path.join(os.sep, "venv", "lib", "python3.11", "site-packages")


@pytest.mark.parametrize("package", ["transformers", "timm", "my_models"])
def test_installed_model_code_in_a_site_packages_path_is_user_code(package):
    assert is_user_file(os.path.join(SITE, package, "models", "bert", "modeling_bert.py"))
    assert is_user_file(os.path.join(SITE.replace("site-", "dist-"), package, "m.py"))


@pytest.mark.parametrize("package", ["torch", "functorch", "onnx", "onnxscript", "onnx_ir", "onnxruntime", "numpy", "sympy", "exporter",
                                     "kernels"])
def test_libraries_in_a_site_packages_path_are_not_user_code(package):
    assert not is_user_file(os.path.join(SITE, package, "nn", "functional.py"))


def test_the_real_libraries_stdlib_and_exporter_are_not_user_code_but_its_examples_are():
    import numpy
    import onnx

    for key in ("purelib", "platlib"):
        assert is_user_file(os.path.join(sysconfig.get_paths()[key], "somepkg", "m.py"))
    for module in (os, torch, numpy, onnx, exporter.frames):
        assert not is_user_file(module.__file__), module
    assert is_user_file(os.path.join(os.path.dirname(exporter.__file__), "examples.py"))
    assert is_user_file(__file__)
    assert not is_user_file("<frozen importlib._bootstrap>") and not is_user_file("") and not is_user_file(None)


def test_an_ipython_cell_is_user_code_when_linecache_has_its_lines():
    cell = "<ipython-input-3-0123456789ab>"
    assert not is_user_file(cell)
    linecache.cache[cell] = (10, None, ["x = 1\n"], cell)
    try:
        assert is_user_file(cell)
        assert not is_user_file("<string>")
    finally:
        del linecache.cache[cell]


def test_user_frame_is_the_innermost_user_frame_of_tuples_or_frame_summaries():
    transformers = os.path.join(SITE, "transformers", "modeling_bert.py")
    frames = [("/home/me/run.py", 3), (transformers, 40), (os.path.join(SITE, "torch", "nn", "linear.py"), 125)]
    assert user_frame(frames) == (transformers, 40)
    assert user_frame(frames[2:]) is None
    assert user_frame([{"file": transformers}], filename=lambda f: f["file"]) == {"file": transformers}


TRANSFORMERS_MODEL = '''
import torch


class FakeBert(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 2:
            return x * 2
        return x + 1


class Broken(torch.nn.Module):
    def forward(self, x):
        return x.reshape(7, 7, 7)
'''


@pytest.fixture(scope="module")
def installed_model(tmp_path_factory):
    """A model module that lives at ``.../site-packages/transformers/modeling_fake.py``."""
    package = tmp_path_factory.mktemp("env") / "site-packages" / "transformers"
    package.mkdir(parents=True)
    path = package / "modeling_fake.py"
    path.write_text(TRANSFORMERS_MODEL)
    spec = importlib.util.spec_from_file_location("fake_transformers_modeling", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_guards_are_located_in_installed_model_code(installed_model):
    session = Session(installed_model.FakeBert(), (torch.randn(4, 3),), {}, ExportOptions(dynamic_shapes={"x": {0: AUTO}}))
    (guard,) = [g for g in session.guards if "> 2" in g.expression]
    assert guard.file == installed_model.__file__ and guard.code == "if x.shape[0] > 2:"


def test_errors_name_the_line_in_installed_model_code(installed_model):
    failure = Session(installed_model.Broken(), (torch.randn(4, 3),)).run("capture").failure
    assert failure.source.startswith(f"{installed_model.__file__}:14 in forward: return x.reshape(7, 7, 7)")


def test_a_stack_trace_maps_to_its_installed_model_frame_not_torchs():
    transformers = os.path.join(SITE, "transformers", "models", "bert", "modeling_bert.py")
    torch_file = os.path.join(SITE, "torch", "nn", "modules", "module.py")
    stack = (
        f'File "{transformers}", line 120, in forward\n    return self.dense(x)\n'
        f'File "{torch_file}", line 1775, in _call_impl\n    return forward_call(*args, **kwargs)'
    )
    assert source_of_stack(stack) == f"{transformers}:120 in forward: return self.dense(x)"


def test_a_hub_kernel_wrapper_frame_is_passed_over_for_the_model_line_that_called_it():
    model = os.path.join(SITE, "transformers", "models", "olmo_hybrid", "modeling_olmo_hybrid.py")
    wrapper = os.path.join(SITE, "kernels", "_internals", "layer", "layer.py")
    stack = (f'File "{model}", line 779, in forward\n    out = torch_chunk_gated_delta_rule(q, k, v)\n'
             f'File "{wrapper}", line 856, in forward\n    return func(*args, **kwargs)')
    assert source_of_stack(stack) == f"{model}:779 in forward: out = torch_chunk_gated_delta_rule(q, k, v)"


def test_a_notebook_cell_is_named_as_ipython_names_it_not_by_its_temporary_file(ipython_shell):
    from exporter.frames import source_label

    shell = ipython_shell
    shell.run_cell("""import torch
from exporter import Dim, ExportOptions, Session

class Pinned(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 4:
            return x * 2
        return x
""", store_history=True)
    cell = shell.execution_count - 1
    shell.run_cell("session = Session(Pinned(), (torch.randn(6, 3),), {}, ExportOptions(dynamic_shapes={'x': {0: 'n'}}))")
    session = shell.user_ns["session"]
    assert session.run().status == "ok"
    (guard,) = [g for g in session.guards if g.file]
    assert guard.source == f"Cell In[{cell}], line 6: if x.shape[0] > 4:"
    assert guard.location == f"Cell In[{cell}], line 6"
    assert source_label("/home/me/model.py", 12, short=True) == "model.py:12"  # files keep their names
    assert source_label(guard.file, 6) != guard.file + ":6"


# -- the caches behind the graphs: the same answers as the uncached rule ----------------------


def test_a_cached_answer_is_the_rules_answer_for_user_library_and_example_files():
    from exporter.compat import frames

    files = [__file__, torch.__file__, os.__file__, os.path.join(SITE, "transformers", "m.py"),
             os.path.join(SITE, "torch", "nn", "functional.py"), os.path.join(os.path.dirname(exporter.__file__), "examples.py")]
    expected = [True, False, False, True, False, True]
    for _ in range(2):  # the second round answers from the cache
        assert [is_user_file(f) for f in files] == expected
        assert [frames._is_user_path(f) for f in files] == expected


def test_a_relative_file_name_is_judged_from_the_working_directory_each_time(tmp_path, monkeypatch):
    monkeypatch.chdir(os.path.dirname(torch.__file__))
    assert not is_user_file(os.path.join("nn", "functional.py"))  # torch's own file, named relatively
    monkeypatch.chdir(tmp_path)
    assert is_user_file(os.path.join("nn", "functional.py"))  # the same name is now the user's


def test_a_cell_in_a_parsed_stack_becomes_the_users_frame_once_the_cell_runs(ipython_shell):
    code = "def forward(x):\n    return x * 3  # test_frames: a cell run after its stack was read\n"
    cell = ipython_shell.compile.get_code_name(code, code, 4242)
    torch_file = os.path.join(SITE, "torch", "nn", "modules", "module.py")
    stack = (f'File "{cell}", line 2, in forward\n    return x * 3\n'
             f'File "{torch_file}", line 1775, in _call_impl\n    return forward_call(*args, **kwargs)')
    assert not is_user_file(cell)
    assert source_of_stack(stack) == f"{torch_file}:1775 in _call_impl: return forward_call(*args, **kwargs)"
    ipython_shell.compile.cache(code, 4242)  # the cell runs: linecache holds it, IPython names it
    try:
        assert is_user_file(cell)
        assert source_of_stack(stack) == "Cell In[4242], line 2 in forward: return x * 3"
    finally:
        del linecache.cache[cell]
    assert source_of_stack(stack) == f"{torch_file}:1775 in _call_impl: return forward_call(*args, **kwargs)"


def test_module_paths_read_from_text_twice_or_from_a_list_agree():
    from exporter.node_metadata import module_path_of

    text = "['', 'encoder', \"L['self'].encoder.layer[0]\", 'linear_3']"
    assert module_path_of(text) == module_path_of(text) == "encoder.layer.0"
    assert module_path_of(["", "encoder", "L['self'].encoder.layer[0]", "linear_3"]) == "encoder.layer.0"
    assert module_path_of("['', 'linear']") == "" and module_path_of("not a list") is None


@pytest.mark.parametrize("text", [
    "['', 'embeddings', 'slice_1']", "[]", "['_empty_nn_module_stack_from_metadata_hook', 'sym_size_int_12']",
    "['transformers.models.bert.modeling_bert.BertModel', 'aten.slice.Tensor']", "[ 'a' , \"L['self'].x\" ]",
    "['a',]", "['é', '']", "['a\\'b']", "['a\\nb']", "['a', 1]", "['a' 'b']", "('a', 'b')", "not a list", "['a', \"b\"",
    "[,]", "",
])
def test_metadata_lists_read_without_ast_read_as_ast_reads_them(text):
    import ast

    from exporter.compat.formats import parse_string_list

    try:
        expected = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        expected = None
    assert parse_string_list(text) == expected
