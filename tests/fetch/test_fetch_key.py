"""The API key: where it comes from, and that it never reaches an output, a log or a file."""

from __future__ import annotations

import base64
import logging
from pathlib import Path

import pytest

from fxstore.errors import InvalidInputError
from fxstore.fetch import ApiKey, load_api_key
from fxstore.fetch.api import redact
from tests.fetch.conftest import FetchRun
from tests.fetch.fake_databento import KEY, FakeDatabento, Fault

MBP_FILE = "glbx-mdp3-20201228.mbp-10.dbn.zst"
WRONG_KEY = "db-WRONGkeyWRONGkeyWRONGkey01234"


def _leaks(secret: str, texts: list[str], root: Path) -> list[str]:
    """Where `secret` (or its basic-auth form) shows: the texts' indexes, the files' paths."""
    forms = [secret.encode(), base64.b64encode(f"{secret}:".encode())]
    found = [f"text {i}" for i, text in enumerate(texts) if any(f.decode() in text for f in forms)]
    for path in root.rglob("*"):
        if path.is_file() and any(f in path.read_bytes() for f in forms):
            found.append(str(path))
    return found


def test_api_key_never_reaches_output_logs_or_files(
    run_fetch: FetchRun,
    server: FakeDatabento,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    server.state.cut_after[MBP_FILE] = (100, 2)
    server.state.corrupt["metadata.json"] = 1
    # --ingest: the bar store's manifests are scanned too.
    ok = run_fetch("--yes", "--with-definitions", "--with-statistics", "--ingest", verbose=True)
    # An error whose message (Databento's text) holds the key, and the key Databento rejects.
    server.state.faults["batch.submit_job"].append(Fault(402, f"no balance for key {KEY}"))
    refused = run_fetch("--yes", "--start", "2020-12-27", verbose=True)
    monkeypatch.setenv("DATABENTO_API_KEY", WRONG_KEY)
    rejected = run_fetch("--yes", "--start", "2020-12-26", verbose=True)

    assert ok.exit_code == 0, ok.output
    assert "no balance for key ****" in refused.output
    assert rejected.output.splitlines()[-1] == (
        "Error: Databento rejected the API key (401 on symbology.resolve): check "
        "DATABENTO_API_KEY or --api-key-file (https://databento.com/portal/keys)."
    )
    assert "Ingested 1 trading days" in ok.output
    assert any((tmp_path / "store" / "bars").rglob("manifest.json"))
    texts = [ok.output, refused.output, rejected.output, caplog.text]
    assert "Retrying download" in caplog.text  # the logs were captured at debug level
    assert _leaks(KEY, texts, tmp_path) == []
    assert _leaks(WRONG_KEY, texts, tmp_path) == []


def test_api_key_file_is_used_in_place_of_the_environment(
    run_fetch: FetchRun, server: FakeDatabento, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(f"{KEY}\n")
    monkeypatch.setenv("DATABENTO_API_KEY", WRONG_KEY)

    result = run_fetch("--dry-run", "--api-key-file", str(key_file), catch=False)

    assert result.exit_code == 0
    assert KEY not in result.output


def test_fetch_without_key_is_one_error_before_any_call(
    run_fetch: FetchRun, server: FakeDatabento, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DATABENTO_API_KEY")

    result = run_fetch("--yes")

    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "Error: no Databento API key: set DATABENTO_API_KEY or pass --api-key-file FILE (keys "
        "are at https://databento.com/portal/keys)."
    ]
    assert server.state.calls == []


@pytest.mark.parametrize(
    ("content", "expected"),
    [("", "expected one API key on one line"), ("db-a db-b", "expected one API key on one line")],
)
def test_load_api_key_bad_file_names_the_file_not_its_content(
    tmp_path: Path, content: str, expected: str
) -> None:
    path = tmp_path / "key"
    path.write_text(content)

    with pytest.raises(InvalidInputError) as err:
        load_api_key(None, path)

    assert str(path) in str(err.value) and expected in str(err.value)
    assert "db-a" not in str(err.value)


def test_load_api_key_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="cannot read it \\(No such file or directory\\)"):
        load_api_key("db-env", tmp_path / "nope")


def test_api_key_repr_and_str_hide_it() -> None:
    key = ApiKey("db-secret")

    assert "db-secret" not in repr(key) and "db-secret" not in str(key)
    assert redact("a db-secret b", key) == "a **** b"
