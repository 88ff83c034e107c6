"""``%onnx_export`` through a real IPython ``InteractiveShell``: loading the extension, the line
and cell forms, ``-o``, ``--dynamic`` reaching the ONNX dim names, usage mistakes as one-line
``UsageError`` s, and a failing export shown as a message with the shell still alive."""

from __future__ import annotations

import onnx
import pytest
from IPython.core.error import UsageError

import workbench.magics

MODELS = '''
import torch

class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(8, 4)

    def forward(self, x, scale=None):
        y = self.linear(x)
        return y if scale is None else y * scale

class Broken(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError("this model cannot be traced")

class GuardedAdd(torch.nn.Module):
    def forward(self, x, y):
        if x.shape[0] > 4:
            x = x * 2
        return x + y

model = Tiny()
x = torch.randn(4, 8)
'''


@pytest.fixture(scope="module")
def ip(ipython_shell):
    shell = ipython_shell
    shell.run_line_magic("load_ext", "workbench")
    assert shell.run_cell(MODELS).success
    return shell


def onnx_dims(session):
    return {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in session.model_proto.graph.input}


def test_load_ext_registers_the_line_and_cell_magic(ip):
    magics = ip.magics_manager.magics
    assert "onnx_export" in magics["line"] and "onnx_export" in magics["cell"]


def test_the_magic_registered_by_load_ext_loads_the_core_on_first_use_with_its_full_help_before(ip):
    from workbench.deferred_magic import DeferredExportMagic

    DeferredExportMagic(ip).register()  # as %load_ext leaves it: the stand-in
    assert isinstance(ip.find_line_magic("onnx_export"), DeferredExportMagic)
    info = ip.object_inspect("%onnx_export")  # what %onnx_export? shows
    assert info["found"] and "--dynamic" in info["docstring"] and "--save" in info["docstring"]
    assert ip.run_cell("%onnx_export --no-widget --no-verify -o deferred model(x)").success
    assert ip.user_ns["deferred"].model_proto.graph.input[0].name == "x"
    real = ip.find_line_magic("onnx_export")
    assert isinstance(real.__self__, workbench.magics.ExportMagics)
    assert ip.find_cell_magic("onnx_export") == real


def test_line_magic_stores_the_session_and_dynamic_names_the_onnx_dims(ip, capsys, tmp_path):
    target = tmp_path / "tiny.onnx"
    ip.run_line_magic("onnx_export", f"-o session --no-verify --dynamic 'x.0=batch' --save {target} model(x)")
    session = ip.user_ns["session"]
    assert session.succeeded and onnx_dims(session) == {"x": ["batch", 8]}
    printed = capsys.readouterr().out
    assert "[batch, 8]" in printed and f"saved {target}" in printed
    assert onnx_dims_of_file(target) == {"x": ["batch", 8]}


def onnx_dims_of_file(path):
    proto = onnx.load(str(path))
    return {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in proto.graph.input}


def test_options_written_after_the_call_are_options_not_part_of_the_call(ip, capsys):
    ip.run_line_magic("onnx_export", "model(x) --dynamic x.0=batch --no-verify -o after")
    assert onnx_dims(ip.user_ns["after"])["x"] == ["batch", 8]
    assert workbench.magics.split_trailing_options("model(x - 1)") == ("model(x - 1)", "")


@pytest.mark.parametrize(
    ("text", "split"),
    [
        ("model(x) --no-widget", ("model(x)", "--no-widget")),
        ("model(x) --no-widget --bench --no-verify", ("model(x)", "--no-widget --bench --no-verify")),
        ("model(x) --save m.onnx", ("model(x)", "--save m.onnx")),
        ("model(x, -y) -o s", ("model(x, -y)", "-o s")),
        ('model(x, s=" --no-widget") --no-verify', ('model(x, s=" --no-widget")', "--no-verify")),
        ("model(x - 1)", ("model(x - 1)", "")),
        ("model(x) - 1", ("model(x) - 1", "")),
    ],
)
def test_the_call_ends_where_the_options_begin_even_when_the_whole_is_an_expression(text, split):
    # "model(x) --no-widget" is itself Python: model(x) - (-no) - widget
    assert workbench.magics.split_trailing_options(text) == split


@pytest.mark.parametrize(
    "line",
    [
        "model(x) -o opts --no-widget --no-verify --save {target} --dynamic x.0=batch",
        "-o opts --no-widget model(x) --no-verify --save {target} --dynamic x.0=batch",
        "-o opts --no-widget --no-verify --save {target} --dynamic x.0=batch model(x)",
    ],
    ids=["after", "around", "before"],
)
def test_options_mean_the_same_before_or_after_the_call(ip, capsys, tmp_path, line):
    target = tmp_path / "m.onnx"
    ip.run_line_magic("onnx_export", line.format(target=target))
    session = ip.user_ns["opts"]
    assert session.succeeded and onnx_dims(session) == {"x": ["batch", 8]}
    printed = capsys.readouterr().out
    # --no-verify: verify did not run, and the session says so
    assert f"saved {target}" in printed and "verification" not in printed.lower() and "not verified" in printed


def test_an_axis_given_twice_is_a_usage_error_before_or_after_the_call(ip):
    for line in ("--dynamic x.0=batch --dynamic x.0=static model(x)", "--dynamic x.0=batch model(x) --dynamic x.0=static"):
        with pytest.raises(UsageError, match=r"x\.0 is given twice: 'x\.0=batch' and 'x\.0=static'; fix: give each axis once"):
            ip.run_line_magic("onnx_export", line)


def test_words_after_the_trailing_options_are_refused(ip):
    with pytest.raises(UsageError, match="'extra' after the options is not an option"):
        ip.run_line_magic("onnx_export", "model(x) --no-verify extra")


@pytest.mark.parametrize(
    "text",
    ["x.0=batch", "x.1=seq:1:512", "x.1=seq::", "x.-1=n::64", "x.0=AUTO", "x0=batch", "x.1=seq:512:1", "x.1=seq:1"],
)
def test_the_magic_and_the_command_line_read_an_axis_request_the_same(text):
    """One grammar (exporter.dims.grammar): the same request, or the same error message."""
    import argparse

    from exporter.cli import build_parser

    export = build_parser()._subparsers._group_actions[0].choices["export"]

    def read(parser, argv):
        try:
            return parser.parse_known_args(argv)[0].__dict__.get("dynamic") or parser.parse_known_args(argv)[0].axes
        except (SystemExit, UsageError, argparse.ArgumentError) as exc:
            return f"error: {exc}"

    magic_parser = workbench.magics.ExportMagics.onnx_export.parser
    magic_parser_error = magic_parser.error
    cli_errors = []
    export.error = lambda message: (cli_errors.append(message), (_ for _ in ()).throw(SystemExit(2)))[1]
    try:
        cli = read(export, ["m.py:f", "-o", "m.onnx", "--dynamic", text])
    finally:
        del export.error
    magic = read(magic_parser, ["--dynamic", text])
    assert magic_parser.error == magic_parser_error
    if cli_errors:
        assert isinstance(magic, str) and cli_errors[0].split(": ", 1)[1] in magic
    else:
        assert cli == magic and cli[0].text == text


def test_line_magic_passes_keyword_arguments_and_options(ip, capsys):
    ip.run_line_magic("onnx_export", "-o scaled --no-verify --no-optimize --opset 18 --strategy strict "
                                     "--fully-masked-rows mean --dynamic x.0=rows:2:64 model(x, scale=torch.tensor(2.0))")
    session = ip.user_ns["scaled"]
    assert session.succeeded and "scale" in session.inputs.paths
    assert (session.options.opset_version, session.options.strategy, session.options.optimize) == (18, "strict", False)
    assert session.options.fully_masked_rows == "mean"
    assert (session.dims["x", 0].min, session.dims["x", 0].max) == (2, 64)
    printed = capsys.readouterr().out  # verify did not run, and the session says so
    assert "verification" not in printed.lower() and "not verified" in printed


def test_the_call_reaches_python_as_written_quotes_and_spaces_included(ip, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ip.run_line_magic("onnx_export", '''-o quoted --no-verify --save "x y.onnx" model(x, scale=torch.tensor(float(len("a  b"))))''')
    session = ip.user_ns["quoted"]
    assert float(session.kwargs["scale"]) == 4.0
    assert "saved x y.onnx" in capsys.readouterr().out and (tmp_path / "x y.onnx").is_file()


def test_cell_magic_runs_the_set_up_code_and_exports_the_last_line(ip, capsys):
    ip.run_cell_magic("onnx_export", "-o from_cell --dynamic x.0=batch",
                      "small = Tiny()\nbatch_of_two = torch.randn(2, 8)\nsmall(batch_of_two)\n")
    session = ip.user_ns["from_cell"]
    assert session.model is ip.user_ns["small"]
    assert onnx_dims(session) == {"x": ["batch", 8]}
    assert "Verification PASSED" in capsys.readouterr().out  # verify runs unless --no-verify


def test_a_guard_in_a_class_defined_in_the_cell_cites_the_cells_line(ip, capsys):
    ip.run_cell_magic("onnx_export", "-o guarded --no-verify --dynamic x.0=auto", (
        "class Branch(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        if x.shape[0] > 2:\n"
        "            return x * 2\n"
        "        return x\n"
        "Branch()(torch.randn(5, 3))\n"
    ))
    row = ip.user_ns["guarded"].dims["x", 0]
    assert (row.obtained, row.min) == ("dynamic", 3)
    assert row.source.endswith(", line 3: if x.shape[0] > 2:") and row.source.startswith("Cell In["), row.source


def test_cell_magic_through_run_cell_like_a_notebook(ip):
    result = ip.run_cell("%%onnx_export -o via_cell --no-verify\nm3 = Tiny()\nm3(torch.randn(3, 8))\n")
    assert result.success and ip.user_ns["via_cell"].succeeded


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("", "give the call to export"),
        ("--dynamic x0=batch model(x)", "'x0=batch': is not INPUT.AXIS=NAME: the axis is missing before '='"),
        ("--dynamic x.1=seq:512:1 model(x)", "'x.1=seq:512:1': min 512 is greater than max 1; fix: x.1=seq:1:512"),
        ("--dynamic x.zero=batch model(x)", "is not an integer"),
        ("--opset 99 model(x)", "99"),
        ("--strategy fastest model(x)", "unknown strategy 'fastest'"),
        ("--no-such-option model(x)", "unrecognized arguments"),
        ("-o 1st model(x)", "is not a Python name"),
        ("model", "is not a call"),
        ("model(x", "is not a Python call"),
        ("model(undefined_tensor)", "NameError: name 'undefined_tensor' is not defined"),
        ("--dynamic y.0=batch model(x)", "'y.0=batch': unknown input 'y'; fix: valid inputs: 'x'"),
        ("--dynamic x.5=batch model(x)", "'x.5=batch': axis 5 is out of range for 'x', a tensor of shape [4, 8] (rank 2); "
                                         "fix: valid axes are 0..1 (or -2..-1)"),
        ("--save /nonexistent/dir/m.onnx model(x)", "/nonexistent/dir"),
        # the call against forward(x, scale=None), and the spec against the example
        ("model(x, x, x)", "the example inputs do not match forward(x, scale): too many positional arguments"),
        ("model()", "missing a required argument: 'x'"),
        ("model(y=x)", "forward has no parameter 'y'"),
        ("--dynamic x.0=b:5:10 model(x)", "the example size 4 is outside Dim 'b'"),
        ("--dynamic x.0=n --dynamic x.1=n model(x)", "share the dim name 'n', but their example sizes differ"),
        ("--save m.txt model(x)", "'m.txt': unknown extension '.txt'; the file written must end in .onnx"),
        ("-o class model(x)", "'class' is a Python keyword"),
    ],
)
def test_a_usage_mistake_is_a_one_line_usage_error(ip, line, message):
    with pytest.raises(UsageError) as raised:
        ip.run_line_magic("onnx_export", line)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_cell_magic_usage_mistakes_are_usage_errors(ip):
    with pytest.raises(UsageError, match="end the %%onnx_export cell with the call"):
        ip.run_cell_magic("onnx_export", "", "y = 1\n")
    with pytest.raises(UsageError, match="the cell's last line"):
        ip.run_cell_magic("onnx_export", "model(x)", "model(x)\n")
    with pytest.raises(UsageError, match="forward has no parameter 'y'") as raised:
        ip.run_cell_magic("onnx_export", "--no-widget", "z = x\nmodel(y=z)\n")
    assert "\n" not in str(raised.value)


def test_o_warns_in_one_line_when_it_replaces_a_variable_the_call_reads(ip, capsys):
    ip.run_cell("replaced_model = Tiny()")
    ip.run_line_magic("onnx_export", "--no-widget --no-verify -o replaced_model replaced_model(x)")
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if "replaces" in line]
    assert len(notes) == 1 and "-o replaced_model replaces the variable 'replaced_model'" in notes[0]
    assert type(ip.user_ns["replaced_model"]).__name__ == "Session"
    ip.run_line_magic("onnx_export", "--no-widget --no-verify -o other_name model(x)")
    assert "replaces" not in capsys.readouterr().err


def test_a_failing_export_is_shown_as_a_message_and_the_shell_stays_alive(ip, capsys):
    result = ip.run_cell("%onnx_export -o broken Broken()(x)")
    assert result.success  # no exception reached the shell
    printed = capsys.readouterr()
    assert "capture failed: " in printed.out and "this model cannot be traced" in printed.out
    assert "Traceback" not in printed.out + printed.err
    assert ip.user_ns["broken"].failed_stage.name == "capture"
    assert ip.run_cell("after = 1 + 1").success and ip.user_ns["after"] == 2


def test_a_rejected_spec_prints_why_per_axis_and_the_suggested_fixes(ip, capsys):
    ip.run_line_magic("onnx_export", "--dynamic x.0=auto --dynamic y.0=dx:3:6 "
                                     "GuardedAdd()(torch.randn(5, 3), torch.randn(5, 3))")
    printed = capsys.readouterr().out
    assert "capture failed: " in printed and "y.0" in printed
    assert "dx = Dim('dx', min=5, max=6)" in printed and "apply_suggested_fixes()" in printed


def test_a_rejected_range_is_said_once_with_the_cells_line_and_healthy_rows_stay_static(ip, capsys):
    import re

    ip.run_cell_magic("onnx_export", "-o narrowed --no-verify --dynamic x.1=seq:1:512", (
        "class Narrow(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        if x.shape[1] > 4:\n"
        "            return x * 2\n"
        "        return x + 1\n"
        "Narrow()(torch.randn(2, 8, 3))\n"
    ))
    session = ip.user_ns["narrowed"]
    assert re.fullmatch(r"x\.shape\[1\] \(seq\): sizes 1–4 take another branch at `if x\.shape\[1\] > 4` "
                        r"\(Cell In\[\d+\], line 3\); the range \[1, 512\] cannot hold", session.failed_stage.failure.message)
    assert [o.obtained for o in session.dims] == ["static", "failed", "static"]
    printed = capsys.readouterr().out
    assert printed.count("take another branch") == 2  # the failure, and the x.1 row without the location
    assert "Not all values" not in printed and "L['x']" not in printed
    assert session.apply_suggested_fixes().run("capture").status == "ok"


def test_a_usage_error_in_a_notebook_cell_is_one_line_not_a_traceback(ip, capsys):
    result = ip.run_cell("%onnx_export --opset 99 model(x)")
    printed = capsys.readouterr()
    assert isinstance(result.error_in_exec, UsageError)
    assert "Traceback" not in printed.out + printed.err


def test_with_a_front_end_the_magic_displays_the_workbench(ip, monkeypatch):
    shown = []
    monkeypatch.setattr(workbench.magics, "shows_widgets", lambda shell: True)
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    ip.run_line_magic("onnx_export", "-o live --no-verify --dynamic x.0=batch model(x)")
    (wb,) = shown
    wb.wait()
    assert wb.session is ip.user_ns["live"]
    assert "dynamic batch [1, inf]" in wb.axis_row("x", 0).result.value
    assert ">[batch, 8]<" in wb.stages_view.ports.value


def test_with_a_front_end_a_failing_export_is_shown_in_the_widget(ip, monkeypatch):
    shown = []
    monkeypatch.setattr(workbench.magics, "shows_widgets", lambda shell: True)
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    assert ip.run_cell("%onnx_export Broken()(x)").success
    (wb,) = shown
    wb.wait()
    assert "this model cannot be traced" in wb.stages_view.error.value
    assert ip.run_cell("still = 'alive'").success


def test_no_widget_prints_text_even_with_a_front_end(ip, monkeypatch, capsys):
    monkeypatch.setattr(workbench.magics, "shows_widgets", lambda shell: True)
    monkeypatch.setattr("IPython.display.display", lambda obj: pytest.fail("no widget expected"))
    ip.run_line_magic("onnx_export", "--no-widget --no-verify model(x)")
    assert "optimize" in capsys.readouterr().out


def test_the_o_name_follows_the_widget_until_the_user_assigns_it():
    from workbench.magics import _rebinder

    namespace = {"s": "first"}
    bind = _rebinder(namespace, "s", "first")
    bind("second")
    assert namespace["s"] == "second"
    namespace["s"] = "mine"  # the user took the name back
    bind("third")
    assert namespace["s"] == "mine"


# -- the export options, declared once (ExportOptions' fields) -------------------------------


def _cli_export_parser():
    from exporter.cli import build_parser

    return build_parser()._subparsers._group_actions[0].choices["export"]


def _action(parser, option):
    (action,) = [a for a in parser._actions if option in a.option_strings]
    return action


def test_every_declared_export_option_is_offered_alike_by_the_command_line_and_the_magic():
    from exporter import ExportOptions
    from exporter.option_fields import flagged_fields

    declared = list(flagged_fields(ExportOptions))
    assert [field.name for field, _ in declared] == [
        "opset_version", "dynamic_shapes", "strategy", "optimize", "runtime_asserts", "fully_masked_rows", "skip_passes",
        "patches",
    ]
    cli, magic = _cli_export_parser(), workbench.magics.ExportMagics.onnx_export.parser
    for field, flag in declared:
        on_cli, on_magic = (_action(parser, flag.names[0]) for parser in (cli, magic))
        assert on_cli.option_strings == on_magic.option_strings == list(flag.names)
        assert on_cli.help == on_magic.help == flag.help, field.name
        assert on_cli.choices == on_magic.choices == flag.choices, field.name
        assert (on_cli.dest, on_cli.default, on_cli.metavar) == (on_magic.dest, on_magic.default, on_magic.metavar)
        assert type(on_cli) is type(on_magic), field.name


@pytest.mark.parametrize(
    "words",
    [
        [],
        ["--opset", "18", "--strategy", "strict", "--no-optimize", "--runtime-asserts", "--fully-masked-rows", "mean",
         "--skip-pass", "NameFixPass", "--skip-pass", "RewritePass", "--dynamic", "x.0=batch", "--dynamic", "x.1=n:2:64",
         "--patch", "tf_same_padding"],
    ],
    ids=["defaults", "every-flag"],
)
def test_a_command_line_and_a_magic_line_build_the_same_export_options(words):
    import torch

    from exporter import Dim, ExportOptions
    from exporter.dims import Name
    from exporter.options import options_from_arguments

    class Double(torch.nn.Module):
        def forward(self, x):
            return x * 2

    model, args = Double(), (torch.randn(4, 8),)
    cli = _cli_export_parser().parse_args(["m.py:make", "-o", "m.onnx", *words])
    magic = workbench.magics.ExportMagics.onnx_export.parser.parse_args([*words, "model(x)"])
    built = options_from_arguments(cli, model, args, {})
    assert built == options_from_arguments(magic, model, args, {})
    if words:
        assert built == ExportOptions(
            opset_version=18, strategy="strict", optimize=False, runtime_asserts=True, fully_masked_rows="mean",
            skip_passes=("NameFixPass", "RewritePass"), dynamic_shapes={"x": {0: Name("batch"), 1: Dim("n", min=2, max=64)}},
            patches=("tf_same_padding",),
        )
    else:
        assert built == ExportOptions()


def test_the_magic_reads_quoted_option_values_as_the_command_line_reads_them_unquoted():
    magic = workbench.magics.ExportMagics.onnx_export.parser
    quoted = magic.parse_args(["--strategy", "'strict'", "--opset", '"18"', "--dynamic", "'x.0=batch'", "model(x)"])
    plain = _cli_export_parser().parse_args(["m.py:make", "-o", "m.onnx", "--strategy", "strict", "--opset", "18",
                                              "--dynamic", "x.0=batch"])
    assert (quoted.strategy, quoted.opset_version, quoted.dynamic) == (plain.strategy, plain.opset_version, plain.dynamic)


# -- %%onnx_export --record (issue 27: record the calls a cell makes, export them) -----------------


def test_record_exports_the_calls_the_cell_made_with_the_batch_they_varied(ip, capsys):
    assert ip.run_cell("recorded_tiny = Tiny()").success  # hooked before the cell runs: it exists already
    ip.run_cell_magic("onnx_export", "--record recorded_tiny -o from_record --no-verify", (
        "for batch in (1, 3, 6):\n"
        "    recorded_tiny(torch.randn(batch, 8))\n"
    ))
    session = ip.user_ns["from_record"]
    assert session.model is ip.user_ns["recorded_tiny"]
    assert tuple(session.args[0].shape) == (3, 8)  # the first call whose dims are >= 2
    assert onnx_dims(session) == {"x": ["batch", 8]}
    out = capsys.readouterr().out
    assert "3 of 3 recorded" in out, out  # the verdict on the recorded calls is shown, saying what it compared


def test_record_with_dynamic_overrides_the_proposed_dim(ip):
    assert ip.run_cell("recorded_again = Tiny()").success
    ip.run_cell_magic("onnx_export", "--record recorded_again -o overridden --no-verify --dynamic x.0=static", (
        "recorded_again(torch.randn(2, 8))\n"
        "recorded_again(torch.randn(5, 8))\n"
    ))
    assert onnx_dims(ip.user_ns["overridden"]) == {"x": [2, 8]}


def test_record_keeps_the_cells_own_exception_and_leaves_no_hook(ip):
    ip.user_ns["hooked"] = ip.user_ns["Tiny"]()
    with pytest.raises(ZeroDivisionError):
        ip.run_cell_magic("onnx_export", "--record hooked", "hooked(torch.randn(2, 8))\n1 / 0\n")
    hooked = ip.user_ns["hooked"]
    assert not hooked._forward_pre_hooks and not hooked._forward_hooks


@pytest.mark.parametrize(
    ("line", "cell", "message"),
    [
        ("--record model", None, "--record runs a cell"),
        ("--group decode model(x)", None, "--group chooses among recorded calls: add --record MODEL"),
        ("--record nowhere", "x + 1\n", "no variable named 'nowhere'"),
        ("--record model model(x)", "model(x)\n", "write no call on the first line"),
        ("--record model", "y = 1\n", "no call of Tiny.forward was observed"),
        ("--record model --group decode", "model(x)\n", "decode"),
    ],
)
def test_record_usage_mistakes_are_one_line_usage_errors(ip, line, cell, message):
    with pytest.raises(UsageError) as raised:
        if cell is None:
            ip.run_line_magic("onnx_export", line)
        else:
            ip.run_cell_magic("onnx_export", line, cell)
    assert message in str(raised.value) and "\n" not in str(raised.value)
