"""The error catalogue (issue 27 items 4 and 6): every code carries its HTTP status, every error class
names a catalogued code, and ``docs/errors.md`` is exactly what the catalogue generates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import awaken.core.errors as errors
from awaken.core.errors import CODES, AwakenError, RateLimited, catalogue_markdown, error_response

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "errors.md"
REGENERATE = "python -m awaken.core.errors > docs/errors.md"


def test_the_errors_page_is_what_the_catalogue_generates():
    assert PAGE.read_text() == catalogue_markdown(), (
        f"docs/errors.md differs from the catalogue in awaken/core/errors.py (CODES): regenerate it with "
        f"`{REGENERATE}`")


def test_the_generator_is_the_module_run_as_a_script():
    out = subprocess.run([sys.executable, "-m", "awaken.core.errors"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert out == catalogue_markdown()
    assert REGENERATE in out  # the page says how it is made


def test_the_page_lists_every_code_once_with_its_status():
    page = PAGE.read_text()
    for code, entry in CODES.items():
        rows = [line for line in page.splitlines() if line.startswith(f"| `{code}` |")]
        assert rows == [f"| `{code}` | {entry.status} | {entry.description} |"], code


def test_every_code_has_a_kind_an_error_status_and_a_description():
    for code, entry in CODES.items():
        assert entry.kind in ("input", "run"), code
        assert 400 <= entry.status <= 599, code
        assert entry.description.strip(), code
        assert CODES[code][0] == entry.kind  # (kind, status, description), kind first as before


def test_every_error_class_carries_the_status_of_its_code():
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, AwakenError)]
    assert len(classes) >= 9
    for cls in classes:
        assert cls.code in CODES, cls
    assert errors.BadCursor("x").status == errors.BadLimit("x").status == 400
    assert errors.UnknownThread("x").status == 404
    assert errors.StoreUnavailable("x").status == 503
    assert errors.Unauthenticated("x", token_given=False).status == 401
    assert RateLimited("x", retry_after=3).status == 429
    # the status follows the code, never the class: the same refusal, the same status
    assert errors.InputRejected("x", code="THREAD_BUSY").status == 409
    assert errors.InputRejected("x", code="UNKNOWN_AGENT").status == 404
    assert errors.InputRejected("x", code="INVALID_JSON").status == 400


def test_error_response_is_the_code_its_status_and_one_body_shape():
    status, headers, body = error_response(errors.UnknownThread("no thread 't'"))
    assert (status, body) == (404, b'{"error":{"code":"UNKNOWN_THREAD","message":"no thread \'t\'"}}')
    assert dict(headers) == {b"content-type": b"application/json", b"cache-control": b"no-store",
                             b"content-length": str(len(body)).encode()}
    status, headers, _ = error_response(RateLimited("wait 3 s", retry_after=3))
    assert status == 429 and (b"retry-after", b"3") in headers
    status, headers, _ = error_response("METHOD_NOT_ALLOWED", "use POST", headers=[(b"allow", b"POST")])
    assert status == 405 and headers[-1] == (b"allow", b"POST")
