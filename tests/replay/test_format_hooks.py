"""The hooks shared code asks a format (issue 31): the CLI's verdict line, the on-disk root
and the companion limits. The outputs are pinned byte for byte as they were when the
commands still named AHD."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from core.formats import archive, formats, largest_input_limits, rooted_format
from core.formats.ahd import AhdRootNotFound
from core.formats.protocol import DEFAULT_INPUT_LIMITS, RootNotFound
from replay import conf
from replay.cli import inputs_beside as cli_inputs_beside
from tests.published import PUBLISHED

MACE = Path(__file__).parent / "fixtures" / "mace"
CHECKOUT = PUBLISHED / "ahd" / "checkout"
EVALS = CHECKOUT / "docs" / "evals"
SWISS = "2026-04-21-swiss"
NO_ROOT = (
    "{path}: no AHD checkout root found (no package.json named @adastracomputing/ahd in "
    "{directory} or its 7 parent directories); pass the checkout with --root DIR"
)
PINNED_OK = (
    "ok\n"
    "  ok   format: AHD replay sidecar 2026-04-21-swiss.replay.json: schema_version 1, kind "
    "eval-live, ahd_version 0.1.0, ahd_commit 4813e2c5a429bde5fe19f2d11891af13fd325cc3, "
    "invoked_at 2026-04-21T21:48:00.597Z, backfilled\n"
    "  ok   root: checkout root {checkout} (found by walking up to the package.json named "
    "@adastracomputing/ahd)\n"
    "  ok   token: hash matches "
    "sha256:380a3d833d9463dbc681df7465993ab6413d8e77188f55f97359f60dc4b746b1 (canonical JSON "
    "of the parsed YAML)\n"
    "  ok   brief: hash matches "
    "sha256:8b7d4275964399a91e6ddec525151ba672ed9c4721279a37ec16ab3450493a4c (canonical JSON "
    "of the parsed YAML)\n"
    "verdict: replay inputs intact\n"
)


@pytest.fixture
def copy(tmp_path) -> Path:
    dst = tmp_path / "ahd"
    shutil.copytree(CHECKOUT, dst, copy_function=shutil.copyfile)
    for directory, _dirs, _files in os.walk(dst):
        Path(directory).chmod(0o755)
    return dst


def verify_out(*args: str) -> str:
    out = io.StringIO()
    call_command("verify", *args, stdout=out)
    return out.getvalue()


def test_verify_prints_an_ahd_sidecars_checks_then_its_verdict_line():
    out = verify_out(str(EVALS / f"{SWISS}.replay.json"))

    lines = out.splitlines()
    assert lines[0] == "ok"
    assert lines[-1] == "verdict: replay inputs intact"
    assert out == PINNED_OK.replace("{checkout}", str(CHECKOUT))


@pytest.mark.django_db
def test_a_format_without_a_verdict_line_prints_its_summary_alone():
    out = io.StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("verify", str(MACE / "log_s1.json"), stdout=out)

    assert exited.value.code == PINNED_MACE_EXIT
    assert out.getvalue() == PINNED_MACE


def test_verify_without_a_checkout_is_the_same_usage_error(tmp_path):
    shutil.copyfile(EVALS / f"{SWISS}.replay.json", tmp_path / "x.replay.json")

    with pytest.raises(CommandError) as failed:
        call_command("verify", str(tmp_path / "x.replay.json"))

    assert failed.value.returncode == 2
    assert str(failed.value) == NO_ROOT.format(path=tmp_path / "x.replay.json", directory=tmp_path)


@pytest.mark.django_db
def test_ingest_reads_a_sidecars_inputs_from_the_checkout_above_it(copy, capsys):
    call_command("ingest", str(copy / "docs" / "evals" / f"{SWISS}.replay.json"))

    assert capsys.readouterr().out == f"{SWISS} ahd-replay replayable ok\n"


@pytest.mark.django_db
def test_ingest_without_a_checkout_reads_the_servers_as_before(tmp_path, settings, capsys):
    settings.REPLAY_AHD_ROOT = None
    shutil.copyfile(EVALS / f"{SWISS}.replay.json", tmp_path / "x.replay.json")

    with pytest.raises(CommandError, match="1 of 1 files refused"):
        call_command("ingest", str(tmp_path / "x.replay.json"))

    assert capsys.readouterr().err == PINNED_INGEST_NO_ROOT.format(path=tmp_path / "x.replay.json")


PINNED_MACE_EXIT = 1
PINNED_MACE = (
    "refused UNKNOWN_KEY: selfrep_snapshot.signature: no HMAC-SHA256 key "
    "'reflective_log_key' in the verification-key registry; register MACE's secret with "
    "`keys add-hmac reflective_log_key --secret-file F` (non-authoritative)\n"
    "  ok   format: a MACE reflective log (schema 1) of job 'job_s1': 2 iterations\n"
    "  ok   required_snapshots: all 5 snapshot files present\n"
    "  FAIL snapshots: selfrep_snapshot.signature: no HMAC-SHA256 key 'reflective_log_key' in "
    "the verification-key registry; register MACE's secret with `keys add-hmac "
    "reflective_log_key --secret-file F`\n"
)
PINNED_INGEST_NO_ROOT = (
    "{path}: refused MISSING_SNAPSHOT: x.replay.json: this server keeps no AHD checkout to "
    "re-hash the token tokens/swiss-editorial.yml and the brief briefs/landing.yml against; "
    "set REPLAY_AHD_ROOT to the checkout they come from, or run `manage.py verify "
    "x.replay.json --root CHECKOUT` where they are\n"
)


def test_the_ahd_format_brings_its_own_hooks():
    ahd = formats().get("ahd-replay")

    assert ahd is rooted_format("x.REPLAY.json")
    assert rooted_format("x.json") is None
    assert ahd.verdict_line({"status": "ok"}) == "verdict: replay inputs intact"
    assert ahd.root_of(EVALS / "x.json", None) is None
    assert ahd.root_of(EVALS / "x.replay.json", "/given") == Path("/given")
    assert ahd.root_of(EVALS / "x.replay.json", None) == CHECKOUT
    assert issubclass(AhdRootNotFound, RootNotFound)


def test_no_other_format_prints_a_verdict_line_or_has_a_root():
    others = [fmt for fmt in formats() if fmt.name != "ahd-replay"]

    assert [fmt.name for fmt in others if hasattr(fmt, "verdict_line")] == []
    assert [fmt.name for fmt in others if hasattr(fmt, "root_of")] == []


def test_ahd_keeps_its_input_and_archive_settings(settings):
    settings.REPLAY_AHD_MAX_INPUT_BYTES = 1000
    settings.REPLAY_AHD_ARCHIVE_MAX_ENTRIES = 3

    limits = conf.input_limits(formats().get("ahd-replay"))

    assert limits.max_input_bytes == 1000
    assert limits.archive == conf.ahd_archive_limits()
    assert limits.archive.max_entries == 3


def test_a_format_without_input_limits_takes_the_default_whatever_ahds_are(settings):
    settings.REPLAY_AHD_MAX_INPUT_BYTES = 1000
    settings.REPLAY_AHD_MAX_ARCHIVE_BYTES = 10

    limits = conf.input_limits(formats().get("paxman-artifact"))

    assert limits.max_input_bytes == DEFAULT_INPUT_LIMITS.max_input_bytes == 64 * 1024**2
    assert limits.archive == archive.DEFAULT_LIMITS


@pytest.mark.parametrize(
    ("ahd_bytes", "largest"), [(1000, 64 * 1024**2), (128 * 1024**2, 128 * 1024**2)]
)
def test_a_companion_of_no_known_format_yet_is_read_up_to_the_largest_limit(
    settings, ahd_bytes, largest
):
    settings.REPLAY_AHD_MAX_INPUT_BYTES = ahd_bytes

    limits = conf.largest_input_limits()

    assert limits.max_input_bytes == largest
    assert limits.archive.max_entry_bytes == largest
    assert limits == largest_input_limits(conf.setting)


@pytest.mark.django_db
def test_a_mace_logs_snapshots_are_read_with_maces_limit_not_ahds(settings):
    settings.REPLAY_AHD_MAX_INPUT_BYTES = 10
    out = io.StringIO()

    with pytest.raises(SystemExit):
        call_command("verify", str(MACE / "log_s1.json"), stdout=out)

    assert out.getvalue() == PINNED_MACE


def test_a_contextos_trace_reads_its_pack_and_kg_snapshot_up_to_its_readers_limit(settings):
    settings.REPLAY_AHD_MAX_INPUT_BYTES = 10

    limits = conf.input_limits(formats().get("contextos-trace"))

    assert limits.max_input_bytes == 64 * 1024**2
    assert limits.archive == archive.DEFAULT_LIMITS


@pytest.mark.parametrize(
    ("name", "archive_name", "found"),
    [
        ("run.replay.json", "run.inputs.tar.gz", True),
        ("Run.REPLAY.JSON", "Run.inputs.zip", True),
        ("run.json", "run.inputs.tgz", False),
        ("run.replay.json.bak", "run.inputs.zip", False),
    ],
)
def test_the_inputs_archive_beside_a_rooted_file_is_found_by_its_run_name(
    tmp_path, name, archive_name, found
):
    (tmp_path / name).write_bytes(b"{}")
    (tmp_path / archive_name).write_bytes(b"")

    beside = cli_inputs_beside(tmp_path / name)

    assert beside == (tmp_path / archive_name if found else None)
