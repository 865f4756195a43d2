"""Conventions that keep the code and its docs from drifting (STYLE.md, "Conventions we keep").

- the pure core (`core/` and `tlog/`) imports no Django, DRF or Celery, and no app, directly
  or through any project module;
- the witness (`witness/`) imports nothing of the console, only the pure `tlog`;
- `replay` never imports `governance`, `console` or `privacy`;
- an app reads a setting with a default (`getattr(settings, NAME, default)`) only in its own
  `conf.py`, whose accessors the rest of the app calls (each default spelt once);
- every error code is documented, and the docs list no code that does not exist.

Imports are read from the source (AST), not executed, so a lazy import inside a function
counts as much as one at the top (only `if TYPE_CHECKING:` blocks are skipped).

The pure core is the `pure-core` contract's list in pyproject.toml ([tool.importlinter]); `make
lint` checks that contract, the apps' layers and the witness's with import-linter
(`lint-imports`), and these tests check the first and the last again, file by file.
"""

from __future__ import annotations

import ast
import re
import tomllib
from functools import cache
from pathlib import Path

import pytest

from core.errors import ERROR_CODES
from core.replay import report

ROOT = Path(__file__).resolve().parent.parent
PROJECT_PACKAGES = (
    "config",
    "core",
    "replay",
    "governance",
    "console",
    "otel",
    "privacy",
    "dsr",
    "tlog",
    "witness",
)
FRAMEWORKS = (
    "django",
    "rest_framework",
    "celery",
    "drf_spectacular",
    "django_htmx",
    "template_partials",
    "django_otp",
    "storages",
)
#: the Django apps and the project's configuration: the pure core imports none of them
APPS = ("config", "replay", "governance", "console", "privacy", "dsr")


def _contract(contract_id: str) -> dict:
    """One of the import contracts `make lint` checks (pyproject.toml, [tool.importlinter])."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["id"] == contract_id)


def _files_of_module(module: str) -> list[str]:
    """The source files of a module, or of every module in a package."""
    base = ROOT.joinpath(*module.split("."))
    if base.is_dir():
        return sorted(str(p.relative_to(ROOT)) for p in base.rglob("*.py"))
    return [str(base.with_suffix(".py").relative_to(ROOT))]


#: the pure core: the source modules of import-linter's `pure-core` contract, one list for both
PURE_CORE = [f for m in _contract("pure-core")["source_modules"] for f in _files_of_module(m)]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _file_of(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


@cache
def imports_of(path: Path) -> tuple[str, ...]:
    """Every module `path` imports (absolute names), wherever the import statement is."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path.parent)
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, node.module] if node.module else anchor)
            else:
                base = node.module or ""
            found.append(base)
            # `from package import submodule` imports the submodule too
            found.extend(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return tuple(found)


def _project_files_of(module: str) -> list[Path]:
    """The files importing `module` executes: every package `__init__` on the way, then it."""
    parts = module.split(".")
    if parts[0] not in PROJECT_PACKAGES:
        return []
    files = []
    for i in range(1, len(parts) + 1):
        file = _file_of(".".join(parts[:i]))
        if file is not None:
            files.append(file)
    return files


def import_chains(start: Path) -> dict[str, list[str]]:
    """Every module reachable from `start` through project modules, with the chain of files
    that leads to it."""
    chains: dict[str, list[str]] = {}
    seen: set[Path] = set()
    queue = [(start, [str(start.relative_to(ROOT))])]
    while queue:
        path, chain = queue.pop()
        if path in seen:
            continue
        seen.add(path)
        for module in imports_of(path):
            chains.setdefault(module, chain)
            for file in _project_files_of(module):
                if file not in seen:
                    queue.append((file, [*chain, str(file.relative_to(ROOT))]))
    return chains


def _offenders(chains: dict[str, list[str]], roots: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{' -> '.join(chain)} imports {module}"
        for module, chain in chains.items()
        if module.split(".")[0] in roots
    )


@pytest.mark.parametrize("relative", PURE_CORE)
def test_it_keeps_the_pure_core_free_of_django_drf_and_celery(relative):
    path = ROOT / relative
    assert path.exists(), f"{relative} is listed as pure core but does not exist"
    assert _offenders(import_chains(path), (*FRAMEWORKS, *APPS)) == []


#: the witness ships with the project but runs apart from it (another machine, another operator)
WITNESS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "witness").rglob("*.py"))


@pytest.mark.parametrize("relative", WITNESS)
def test_it_keeps_the_witness_apart_from_the_console(relative):
    assert _offenders(import_chains(ROOT / relative), (*FRAMEWORKS, "core", *APPS)) == []


def test_it_sees_an_import_hidden_in_a_function_and_through_a_package():
    # the checker itself: a lazy import two modules away is still found
    assert "django.conf" in imports_of(ROOT / "replay" / "services.py")
    chains = import_chains(ROOT / "replay" / "management" / "commands" / "ingest.py")
    assert any(m.startswith("django") for m in chains)


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "replay").rglob("*.py")),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_it_never_imports_governance_or_console_from_replay(path):
    offenders = sorted(
        module
        for module in imports_of(path)
        if module.split(".")[0] in ("governance", "console", "privacy")
    )

    assert offenders == []


# --- settings are read through each app's conf.py ----------------------------------------------


def settings_getattrs(source: str) -> list[int]:
    """The lines of ``getattr(settings, ...)`` calls in ``source``: on ``django.conf.settings``
    under any name it is imported as, or on any ``<something>.settings``."""
    tree = ast.parse(source)
    names = {"settings"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "django.conf":
            names |= {a.asname or a.name for a in node.names if a.name == "settings"}
    lines = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and node.args
        ):
            continue
        target = node.args[0]
        if (isinstance(target, ast.Name) and target.id in names) or (
            isinstance(target, ast.Attribute) and target.attr == "settings"
        ):
            lines.append(node.lineno)
    return sorted(lines)


PROJECT_FILES = sorted(
    p
    for package in PROJECT_PACKAGES
    for p in (ROOT / package).rglob("*.py")
    if "migrations" not in p.parts
)


def test_it_reads_settings_with_a_default_only_in_a_conf_module():
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in PROJECT_FILES
        if path.name != "conf.py"
        for line in settings_getattrs(path.read_text(encoding="utf-8"))
    ]

    assert offenders == []


def test_it_sees_a_settings_getattr_under_any_name():
    # the checker itself: each spelling is found, an unrelated getattr is not
    source = (
        "from django.conf import settings as django_settings\n"
        "import django.conf\n"
        "a = getattr(settings, 'X', 1)\n"
        "b = getattr(django_settings, 'Y', 2)\n"
        "c = getattr(django.conf.settings, 'Z', 3)\n"
        "d = getattr(trace, 'format', None)\n"
    )
    assert settings_getattrs(source) == [3, 4, 5]
    # and the accessors are where it looks: every app that reads settings has its conf.py
    found = {
        str(p.relative_to(ROOT)) for p in PROJECT_FILES if settings_getattrs(p.read_text("utf-8"))
    }
    assert found == {
        "console/conf.py",
        "dsr/conf.py",
        "governance/conf.py",
        "otel/conf.py",
        "replay/conf.py",
    }


# --- every setting an accessor reads is documented in docs/configuration.md -------------------

CONFIGURATION_DOC = ROOT / "docs" / "configuration.md"
SETTINGS_FILE = ROOT / "config" / "settings.py"
#: where settings are read with their defaults: each app's conf.py, a format's settings.py
ACCESSOR_FILES = sorted(
    [
        *(p for package in PROJECT_PACKAGES if (p := ROOT / package / "conf.py").is_file()),
        *(ROOT / "core" / "formats").glob("*/settings.py"),
    ]
)


def settings_read(source: str) -> set[str]:
    """The settings ``source`` reads by name: ``getattr(settings, "NAME", ...)`` (django.conf's
    settings under any name it is imported as) and ``setting("NAME", ...)`` (replay/conf.py's
    accessor, which a format's settings accessors are given)."""
    tree = ast.parse(source)
    names = {"settings"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "django.conf":
            names |= {a.asname or a.name for a in node.names if a.name == "settings"}
    found = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        args = node.args
        if node.func.id == "getattr" and len(args) >= 2:
            target, name = args[0], args[1]
            on_settings = (isinstance(target, ast.Name) and target.id in names) or (
                isinstance(target, ast.Attribute) and target.attr == "settings"
            )
        elif node.func.id == "setting" and args:
            on_settings, name = True, args[0]
        else:
            continue
        if on_settings and isinstance(name, ast.Constant) and isinstance(name.value, str):
            found.add(name.value)
    return found


def environment_of_settings(source: str) -> dict[str, set[str]]:
    """For each setting a settings module assigns at module level (``NAME = ...``, ``NAME[k] =
    ...``), the environment variables its value is read from (``env_*("VAR", ...)`` calls),
    through the module-level names it is made of, transitively."""
    tree = ast.parse(source)
    direct: dict[str, set[str]] = {}
    uses: dict[str, set[str]] = {}

    def module_level(node: ast.AST):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            yield child
            yield from module_level(child)

    for node in module_level(tree):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            base = target.value if isinstance(target, ast.Subscript) else target
            if not isinstance(base, ast.Name):
                continue
            env, names = direct.setdefault(base.id, set()), uses.setdefault(base.id, set())
            for inner in ast.walk(value):
                if (
                    isinstance(inner, ast.Call)
                    and isinstance(inner.func, ast.Name)
                    and inner.func.id.startswith("env_")
                    and inner.args
                    and isinstance(inner.args[0], ast.Constant)
                ):
                    env.add(inner.args[0].value)
                elif isinstance(inner, ast.Name):
                    names.add(inner.id)
    resolved: dict[str, set[str]] = {}
    for name in direct:
        seen, todo, env = {name}, [name], set()
        while todo:
            current = todo.pop()
            env |= direct.get(current, set())
            for used in uses.get(current, set()) - seen:
                if used in direct:
                    seen.add(used)
                    todo.append(used)
        resolved[name] = env
    return resolved


def documented_variables() -> set[str]:
    """The variables docs/configuration.md's tables name in their first column."""
    found = set()
    for line in CONFIGURATION_DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("| ") and not line.startswith("|---"):
            found |= set(re.findall(r"`([A-Z][A-Z0-9_]+)`", line.split("|")[1]))
    return found


def test_every_setting_an_accessor_reads_is_an_environment_variable_documented():
    environment = environment_of_settings(SETTINGS_FILE.read_text(encoding="utf-8"))
    documented = documented_variables()
    read = {
        name: str(path.relative_to(ROOT))
        for path in ACCESSOR_FILES
        for name in settings_read(path.read_text(encoding="utf-8"))
    }
    assert read, "no accessor found: the checker lost its way"

    not_from_environment = sorted(
        f"{n} ({where})" for n, where in read.items() if not environment.get(n)
    )
    undocumented = sorted(
        f"{n} ({where}): {', '.join(sorted(environment[n] - documented))}"
        for n, where in read.items()
        if environment.get(n) and not environment[n] <= documented
    )

    assert not_from_environment == [], "config/settings.py does not read these from the environment"
    assert undocumented == [], "docs/configuration.md names no row for these variables"


def test_the_settings_checker_follows_the_names_a_setting_is_made_of():
    source = (
        "import json\n"
        "DEBUG = env_bool('DJANGO_DEBUG', True)\n"
        "ROOT = env_str('X_ROOT') or ('demo' if DEBUG else '')\n"
        "_TEXT = env_str('X_LIST', '[]')\n"
        "try:\n"
        "    LIST = json.loads(_TEXT)\n"
        "except ValueError:\n"
        "    raise\n"
        "SCHEDULE = {}\n"
        "SCHEDULE['a'] = {'every': float(env_int('X_EVERY', 5))}\n"
        "CONSTANT = 3\n"
        "def helper():\n"
        "    INSIDE = env_str('NOT_MODULE_LEVEL')\n"
    )
    assert environment_of_settings(source) == {
        "DEBUG": {"DJANGO_DEBUG"},
        "ROOT": {"X_ROOT", "DJANGO_DEBUG"},
        "_TEXT": {"X_LIST"},
        "LIST": {"X_LIST"},
        "SCHEDULE": {"X_EVERY"},
        "CONSTANT": set(),
    }
    reader = (
        "from django.conf import settings as s\n"
        "a = getattr(s, 'A', 1)\n"
        "b = setting('B', None)\n"
        "c = getattr(settings, name, None)\n"
        "d = getattr(trace, 'D', None)\n"
    )
    assert settings_read(reader) == {"A", "B"}
    # the replay caps, read by replay/conf.py, come from their own variables
    environment = environment_of_settings(SETTINGS_FILE.read_text(encoding="utf-8"))
    assert environment["REPLAY_MAX_SECONDS"] == {"REPLAY_MAX_SECONDS"}
    assert environment["REPLAY_MAX_ITERATIONS"] == {"REPLAY_MAX_ITERATIONS"}
    assert {"REPLAY_MAX_SECONDS", "REPLAY_MAX_ITERATIONS"} <= documented_variables()


def test_every_project_package_is_under_an_import_contract():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    layers = _contract("apps")["layers"]
    in_layers = {name.strip() for layer in layers for name in layer.split("|")}

    assert sorted(config["tool"]["importlinter"]["root_packages"]) == sorted(PROJECT_PACKAGES)
    assert sorted([*in_layers, *_contract("witness")["source_modules"]]) == sorted(PROJECT_PACKAGES)


def test_the_architecture_page_counts_the_imports_the_contracts_let_through():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    ignored = sum(
        len(c.get("ignore_imports", [])) for c in config["tool"]["importlinter"]["contracts"]
    )
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")

    assert re.findall(r"\((\d+) imports? let through\)", page) == [str(ignored)]


# --- error codes are documented --------------------------------------------------------------

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ERROR_CODES_DOC = ROOT / "docs" / "error-codes.md"


def _table_rows(markdown: str, header: str) -> list[list[str]]:
    """The body rows of the first Markdown table whose header row starts with `header`."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} "))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _codes(cell: str) -> list[str]:
    return re.findall(r"`([A-Z_]+)`", cell)


@pytest.mark.parametrize("code", sorted(ERROR_CODES))
def test_it_documents_every_error_code(code):
    documented_in = [doc.name for doc in DOCS if f"`{code}`" in doc.read_text(encoding="utf-8")]

    assert documented_in, f"{code} is in core.errors.ERROR_CODES but in no doc"


def test_it_lists_exactly_the_error_codes_that_exist():
    rows = _table_rows(ERROR_CODES_DOC.read_text(encoding="utf-8"), "code")
    listed = [code for row in rows for code in _codes(row[0])]

    assert sorted(listed) == sorted(ERROR_CODES)
    assert len(listed) == len(set(listed)), "a code is listed twice"
    assert all(row[1] for row in rows), "every code says when it is raised"


def test_it_documents_the_verdict_of_every_error_code():
    rows = _table_rows(ERROR_CODES_DOC.read_text(encoding="utf-8"), "status")
    by_status = {re.findall(r"`([a-z_]+)`", row[0])[0]: row[1] for row in rows}

    assert sorted(by_status) == sorted(
        [report.OK, report.DIVERGED, report.TAMPER_DETECTED, report.REFUSED]
    )
    assert by_status[report.OK] == "none"
    for code in ERROR_CODES:
        status = report._STATUS_OF.get(code, report.REFUSED)
        if status != report.REFUSED:
            assert code in _codes(by_status[status]), f"{code} is {status}"
    assert by_status[report.REFUSED] == "every other code"


def test_it_documents_every_governance_refusal_with_its_status():
    from console.refusals import governance_status
    from core.ledger.codes import REFUSALS

    rows = _table_rows(ERROR_CODES_DOC.read_text(encoding="utf-8"), "code | status")
    documented = {_codes(code)[0]: int(status) for code, status, _ in rows}
    assert documented == {code: governance_status(code) for code in REFUSALS}
