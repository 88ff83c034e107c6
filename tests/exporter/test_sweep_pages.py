"""The sweep's pages and its records file, from records built by hand (no export runs): the
dashboard's title, the coverage page's escaping and its "Regenerate with" command, and
``records.jsonl`` after a sweep was killed while writing."""

from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path

import pytest

from exporter.sweep import SweepResults, Unit, UnitRecord, failure_class, load_results
from exporter.sweep.coverage import coverage_markdown, regenerate_command
from exporter.sweep.dashboard import dashboard_html
from exporter.sweep.store import RecordStore, SweepStoreWarning

SWEEP_MODELS = str(Path(__file__).with_name("sweep_models.py"))


def record(model: str, status: str = "passed", *, zoo: str = "tests", source: str = SWEEP_MODELS, spec: str = "dynamic",
           error: str | None = None, stage: str | None = None, **options: object) -> UnitRecord:
    unit = Unit(zoo, model, source, spec, **options)  # type: ignore[arg-type]
    return UnitRecord(unit.unit_id, zoo, model, spec, status, options=unit.options, failed_stage=stage, error=error,
                      failure_class=failure_class(error), source=source)


# -- the dashboard's title ---------------------------------------------------------------------


def test_the_dashboard_title_and_heading_are_the_title_not_the_last_units_error():
    records = [record("a", "export_failed", error="RuntimeError: first", stage="capture"),
               record("b", "export_failed", error="ValueError: the last unit's error", stage="capture")]
    default = dashboard_html(records)
    assert "<title>Zoo sweep</title>" in default and "<h1>Zoo sweep</h1>" in default
    custom = dashboard_html(records, title="Nightly <zoo>")
    assert "<title>Nightly &lt;zoo&gt;</title>" in custom and "<h1>Nightly &lt;zoo&gt;</h1>" in custom
    assert 'title="ValueError: the last unit&#x27;s error"' in custom  # the cell's tooltip keeps its own error


# -- the coverage page: markup escaped -----------------------------------------------------------


def _unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def test_coverage_cells_escape_markup_in_model_and_zoo_names_and_error_text():
    error = "ValueError: a | b\n<b>bold</b> `tick` *star* _under_ [link](x)"
    records = [record("a|b<script>", "export_failed", zoo="z_oo*", error=error, stage="capture")]
    text = re.sub(r"```\n.*?\n```", "", coverage_markdown(records), flags=re.S)  # a code block shows text as it is
    assert "<script>" not in text and "<b>" not in text
    (row,) = [line for line in text.splitlines() if line.startswith("| a")]
    assert _unescaped_pipes(row) == 9  # eight cells: no pipe of a name or an error splits one
    assert row.startswith(r"| a\|b&lt;script&gt; |")
    assert r"ValueError: a \| b &lt;b&gt;bold&lt;/b&gt; \`tick\` \*star\* \_under\_ \[link\](x) |" in row
    assert r"## z\_oo\* (0 of 1 pass, 0 export)" in text
    assert "`tick`" not in text  # only the page's own code spans stay markup


def test_a_long_error_is_cut_before_escaping_so_no_escape_is_cut_in_half():
    records = [record("m", "export_failed", error="E: " + "<" * 400, stage="capture")]
    (row,) = [line for line in coverage_markdown(records).splitlines() if line.startswith("| m |")]
    cell = row.rsplit(" | ", 1)[1]
    assert cell.endswith("&lt;… |") and cell.count("&lt;") == 160 - len("E: ") - 1
    assert not re.search(r"&(?!lt;)", cell)  # every entity whole


# -- the coverage page: the command that regenerates it ----------------------------------------


def _parsed(command: str) -> argparse.Namespace:
    from exporter.sweep.cli import add_sweep_parser

    words = shlex.split(command)
    assert words[:2] == ["onnx-workbench", "sweep"]
    parser = argparse.ArgumentParser()
    add_sweep_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(words[1:])


def test_regenerate_with_is_the_command_that_runs_these_records_units_again():
    from exporter.sweep import plan_units

    records = [record(m, spec=s, opset=18, strategy="strict", baseline=False) for m in ("mlp", "conv") for s in ("static",)]
    command = regenerate_command(records, output_dir="out dir", path="docs/mine.md")
    assert "transformers" not in command and "timm" not in command
    args = _parsed(command)
    assert (args.zoo, args.output, args.coverage) == ([SWEEP_MODELS], "out dir", "docs/mine.md")
    units = plan_units(args.zoo, models=args.model, specs=tuple(args.spec or ("dynamic",)), opset=args.opset,
                       strategy=args.strategy, optimize=args.optimize, verify=args.verify, benchmark=args.benchmark,
                       baseline=args.baseline, limit=args.limit)
    assert [u.unit_id for u in units] == [r.unit_id for r in records]
    text = coverage_markdown(records, output_dir="out dir", path="docs/mine.md")
    assert f"```\n{command}\n```" in text


def test_regenerate_with_names_no_model_when_the_records_cover_the_whole_zoo():
    from exporter.sweep.zoo import get_zoo

    every = [e.name for e in get_zoo("tests", SWEEP_MODELS).entries()]
    command = regenerate_command([record(m) for m in every])
    assert "--model" not in command and "--spec" not in command and "--opset" not in command
    assert shlex.split(command)[2:4] == ["--zoo", SWEEP_MODELS]


def test_the_subcommand_writes_its_own_output_and_page_into_the_regenerate_command(tmp_path, capsys):
    from exporter.sweep.cli import run_sweep_command

    out = tmp_path / "results"
    SweepResults((record("mlp"),)).save(out)  # already recorded: the command runs nothing
    page = tmp_path / "page.md"
    args = _parsed(f"onnx-workbench sweep --zoo {SWEEP_MODELS} --model mlp -o {out} --coverage {page} --no-progress"
                   " --workers 1 --timeout 1200 --threads 2")
    assert run_sweep_command(args) == 0
    command = _parsed(page.read_text().split("```\n", 1)[1].split("\n```", 1)[0])
    assert command.output == str(out) and command.coverage == str(page)
    assert (command.workers, command.timeout, command.threads, command.memory_gb) == (1, 1200, 2, 6)


# -- records.jsonl after a killed write ------------------------------------------------------------


def test_records_appended_after_a_torn_line_start_lines_of_their_own_and_every_whole_record_loads(tmp_path):
    store = RecordStore(tmp_path)
    for name in ("a", "b", "c"):
        store.append(record(name))
    with open(store.path, "a") as out:
        out.write('{"unit_id": "tests/x/dynamic/0000')  # killed while writing
    for name in ("d", "e", "f", "g", "h", "i"):
        store.append(record(name))

    lines = store.path.read_text().splitlines()
    assert lines[3] == '{"unit_id": "tests/x/dynamic/0000'
    assert [json.loads(line)["model"] for line in lines[4:]] == ["d", "e", "f", "g", "h", "i"]
    with pytest.warns(SweepStoreWarning, match=r"line\(s\) 4 hold no whole record"):
        loaded = load_results(tmp_path)
    assert [r.model for r in loaded.records] == list("abcdefghi") and loaded.torn_lines == (4,)


def test_a_record_written_onto_a_torn_line_by_an_older_release_is_read_and_the_line_reported(tmp_path):
    torn = '{"unit_id": "tests/x/dynamic/0000'
    whole = [json.dumps(record(name).to_dict()) for name in ("a", "b")]
    (tmp_path / "records.jsonl").write_text(f"{whole[0]}\n{torn}{whole[1]}\n")
    with pytest.warns(SweepStoreWarning):
        loaded = load_results(tmp_path)
    assert [r.model for r in loaded.records] == ["a", "b"] and loaded.torn_lines == (2,)


def test_regenerate_with_runs_a_zoo_file_that_did_not_import_again_without_naming_its_row_as_a_model():
    broken = record("(import)", "build_failed", zoo="bad", source="/work/bad.py", stage="import", error="KeyError: 'x'")
    command = regenerate_command([broken, record("mlp")])
    args = _parsed(command)
    assert args.zoo == ["/work/bad.py", SWEEP_MODELS] and args.model == ["mlp"]


def test_a_zoos_heading_counts_a_wrong_export_as_exported_but_not_as_passing():
    records = [record("right"), record("wrong", "verify_failed", stage="verify"), record("unjudged", "not_verified"),
               record("broken", "export_failed", stage="capture")]
    assert "## tests (1 of 4 pass, 3 export)" in coverage_markdown(records)
    assert "tests — 1 of 4 pass, 3 export" in dashboard_html(records)
