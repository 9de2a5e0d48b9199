"""CONTRIBUTING.md's recipe "Add a value to the vocabulary", followed: one edit to the table, one run
of scripts/generate-vocabulary, and every language has the value.

  python3 vocabulary_recipe_test.py SOURCE_DIR CXX CLANG_FORMAT

The table is copied and edited (a trigger source `scheduler`, a result code `gateway_refused` that
`idemctl settle` exits 8 for), the files are generated into a scratch tree, and then: the C++
header compiles with the library's vocabulary machinery and knows both values; the Python module
imports and parses them; the TypeScript module and the SQL domain and function list them. A table
that breaks the rules (a value twice, a flag no predicate reads) is refused by name.
"""

from __future__ import annotations

import importlib.util
import pathlib
import re
import subprocess
import sys
import tempfile

SOURCE, CXX, CLANG_FORMAT = (pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3])
GENERATOR = SOURCE / "scripts/generate-vocabulary"
failures: list[str] = []


def check(condition: bool, what: str) -> None:
    print(("ok    " if condition else "FAIL  ") + what)
    if not condition:
        failures.append(what)


def generate(table: pathlib.Path, root: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(GENERATOR), "--table", str(table), "--root", str(root), "--clang-format", CLANG_FORMAT],
        capture_output=True,
        text=True,
    )


def edited_table(text: str) -> str:
    """The recipe's one edit: a value appended to two vocabularies."""
    source = '  { value = "callback", cpp = "Callback", meaning = "an async callback or webhook re-drove the request" },\n'
    assert source in text, "the table's trigger sources moved; update the recipe test"
    text = text.replace(
        source, source + '  { value = "scheduler", cpp = "Scheduler", meaning = "a scheduled job re-ran the operation" },\n'
    )
    last = re.search(r'  \{ value = "side_effect_recorded".*\n', text)
    assert last, "the table's result codes moved; update the recipe test"
    return (
        text[: last.end()]
        + '  { value = "gateway_refused", cpp = "GatewayRefused", meaning = "the gateway refused the change", '
        + 'exit_code = 8, settle_help = "the gateway refused the settle" },\n'
        + text[last.end() :]
    )


with tempfile.TemporaryDirectory() as scratch:
    work = pathlib.Path(scratch)
    table = work / "vocabulary.toml"
    table.write_text(edited_table((SOURCE / "shared/vocabulary.toml").read_text(encoding="utf-8")), encoding="utf-8")
    tree = work / "tree"
    run = generate(table, tree)
    check(run.returncode == 0, f"the generator accepts the edited table ({run.stderr.strip()})")
    written = sorted(line.removeprefix("wrote ") for line in run.stdout.splitlines())
    check("shared/include/idem/vocabulary_table.hpp" in written, "the C++ header is written")

    # C++: the generated header in place of the tree's, beside the library's own machinery.
    program = work / "uses_the_new_values.cpp"
    program.write_text(
        '#include "idem/vocabulary.hpp"\n'
        "using namespace idem;\n"
        'static_assert(tryParse<TriggerSource>("scheduler") == TriggerSource::Scheduler);\n'
        "static_assert(!isFirstAttempt(TriggerSource::Scheduler));\n"
        "static_assert(kRetrySources.size() == 5);\n"
        "static_assert(listsEveryEnumeratorInOrder<TriggerSource>());\n"
        'static_assert(format(ResultCode::GatewayRefused) == "gateway_refused");\n'
        "static_assert(exitCodeOf(ResultCode::GatewayRefused) == 8);\n"
        "static_assert(kSettleRefusals.back().first == ResultCode::GatewayRefused);\n"
        "int main() { return 0; }\n",
        encoding="utf-8",
    )
    compiled = subprocess.run(
        [CXX, "-std=c++20", "-fsyntax-only", f"-I{tree / 'shared/include'}", f"-I{SOURCE / 'shared/include'}", str(program)],
        capture_output=True,
        text=True,
    )
    check(compiled.returncode == 0, f"C++ knows both values at compile time {compiled.stderr.strip()[:400]}")

    # Python: the generated module imports and parses the new values.
    spec = importlib.util.spec_from_file_location("generated_vocabulary", tree / "clients/python/idemwatch/vocabulary.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    check(module.TriggerSource("scheduler") is module.TriggerSource.SCHEDULER, "Python parses the new trigger source")
    check(module.ResultCode("gateway_refused") is module.ResultCode.GATEWAY_REFUSED, "Python parses the new result code")

    typescript = (tree / "clients/typescript/src/vocabulary.ts").read_text(encoding="utf-8")
    check('"scheduler", //' in typescript and '"gateway_refused", //' in typescript, "TypeScript lists both values")
    domain = (tree / "sql/objects/domains/trigger_source.sql").read_text(encoding="utf-8")
    check("'callback', 'scheduler'))" in domain, "the trigger_source domain's check allows the new source")
    function = (tree / "sql/objects/functions/vocabulary.sql").read_text(encoding="utf-8")
    check("'side_effect_recorded', 'gateway_refused']" in function, "idem.vocabulary lists the new result code")

    # The rules of the table, refused by name.
    twice = table.read_text(encoding="utf-8").replace('value = "scheduler", cpp = "Scheduler"', 'value = "llm", cpp = "Scheduler"')
    table.write_text(twice, encoding="utf-8")
    run = generate(table, work / "refused")
    check(run.returncode == 2 and "value 'llm' is listed twice" in run.stderr, f"a value listed twice is refused: {run.stderr.strip()}")
    table.write_text(twice.replace('value = "llm", cpp = "Scheduler"', 'value = "scheduler", cpp = "Scheduler", flags = ["cron"]'), encoding="utf-8")
    run = generate(table, work / "refused")
    check(run.returncode == 2 and "flag 'cron', which no predicate reads" in run.stderr, f"an unknown flag is refused: {run.stderr.strip()}")
    help_only = table.read_text(encoding="utf-8").replace(', flags = ["cron"]', "")
    help_only = help_only.replace('exit_code = 8, settle_help', 'settle_help')
    table.write_text(help_only, encoding="utf-8")
    run = generate(table, work / "refused")
    check(run.returncode == 2 and "has settle_help but no exit_code" in run.stderr, f"help without an exit code is refused: {run.stderr.strip()}")
    check(not (work / "refused").exists(), "a refused table writes nothing")

sys.exit(1 if failures else 0)
