"""Folder adds over the real server (an attack pass; the service and CLI: tests/integration/test_folder_add_faults.py).

* ``POST /api/v1/resources`` of a folder holding a file whose name is not UTF-8 answered 500 ``API-5001`` after the
  write had committed (a client retries a write that happened): it is 200, the file listed as skipped, escaped.
* A non-strict folder add (a server-side path, or an upload of several files with ``strict=false``) failed as a whole
  when one file was over ``ingest.max_chunks_per_document`` (413 ``WRT-4132``) or its URI named an existing directory
  (409 ``WRT-4091``): such files are listed under ``failures`` and the rest is written; ``strict=true`` still fails.
* FIFOs and devices in the folder were dropped silently: they are skipped as not regular files, never opened.
"""

from __future__ import annotations

import os

import httpx
import pytest

from context_engine.interfaces.http import create_app
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from tests.http.conftest import ACME_ADMIN
from tests.http.helpers import LiveServer
from tests.integration.test_folder_add_faults import OK, long_doc, not_utf8_name

CLASH = "# Clash\n\nIts URI names an existing directory.\n"


@pytest.fixture(scope="module")
def service(tmp_path_factory, embedder, upload_root):
    """This module's engine (the conftest's fixtures use it): a chunk limit of 5, and ``ctx://resources/fz/clash.md/``
    is a directory."""
    settings = load_settings(
        tmp_path_factory.mktemp("folder-home"),
        http={"allowed_upload_roots": (upload_root,)},
        ingest={"max_chunks_per_document": 5},
    )
    svc = ContextEngineService(settings, embedder=embedder)
    svc.add_text("# Inner\n\nBelow a directory named like a file.", "ctx://resources/fz/clash.md/in.md", ACME_ADMIN)
    yield svc
    svc.close()


@pytest.fixture(scope="module")
def live(service, tenants):
    with LiveServer(create_app(service=service)) as server:
        yield server


def stored(service, below: str) -> list[str]:
    return sorted(n.uri for n in service.metadata.list_all_nodes("acme") if n.uri.startswith(below))


def add_path(live, tenants, path, target: str, *, strict: bool = False) -> httpx.Response:
    return httpx.post(
        f"{live.url}/api/v1/resources",
        json={"path": str(path), "target_uri": target, "strict": strict},
        headers=tenants.admin,
        timeout=120,
    )


def test_a_file_name_that_is_not_utf8_is_a_200_listing_it_as_skipped(live, service, tenants, upload_root):
    folder = upload_root / "fz-names"
    folder.mkdir()
    (folder / "ok.md").write_text(OK, encoding="utf-8")
    not_utf8_name(folder)
    r = add_path(live, tenants, folder, "ctx://resources/fz2/")
    assert r.status_code == 200, r.text
    report = r.json()  # the body is UTF-8 JSON
    assert report["uris"] == ["ctx://resources/fz2/ok.md"] and report["skipped"] == 1
    [skip] = report["skipped_paths"]
    assert skip["path"] == "n\\xff.md" and "'n\\xff.md'" in skip["reason"]
    assert stored(service, "ctx://resources/fz2/") == ["ctx://resources/fz2/", "ctx://resources/fz2/ok.md"]


def test_fifos_and_devices_are_listed_as_skipped(live, tenants, upload_root):
    folder = upload_root / "fz-special"
    folder.mkdir()
    (folder / "ok.md").write_text(OK, encoding="utf-8")
    os.mkfifo(folder / "pipe.md")
    expected = {"pipe.md"}
    try:
        os.mknod(folder / "null.md", 0o644 | 0o020000, os.makedev(1, 3))
        expected.add("null.md")
    except (PermissionError, OSError):
        pass
    r = add_path(live, tenants, folder, "ctx://resources/special/")
    assert r.status_code == 200, r.text
    report = r.json()
    assert (report["nodes"], report["skipped"], report["failed"]) == (1, len(expected), 0)
    reasons = {s["path"]: s["reason"] for s in report["skipped_paths"]}
    assert set(reasons) == expected
    assert all(why.startswith("not a regular file (") for why in reasons.values())


def test_a_non_strict_path_add_lists_chunk_and_directory_failures(live, service, tenants, upload_root):
    folder = upload_root / "fz-mixed"
    folder.mkdir()
    (folder / "a.md").write_text(OK, encoding="utf-8")
    (folder / "big.md").write_text(long_doc(), encoding="utf-8")
    (folder / "clash.md").write_text(CLASH, encoding="utf-8")
    before = stored(service, "ctx://resources/")
    strict = add_path(live, tenants, folder, "ctx://resources/fz/", strict=True)
    assert strict.status_code == 409 and strict.json()["code"] == "WRT-4091", strict.text  # checked first
    assert stored(service, "ctx://resources/") == before
    r = add_path(live, tenants, folder, "ctx://resources/fz/")
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["uris"] == ["ctx://resources/fz/a.md"] and report["failed"] == 2
    assert [(f["path"], f["code"]) for f in report["failures"]] == [("big.md", "WRT-4132"), ("clash.md", "WRT-4091")]
    assert stored(service, "ctx://resources/") == sorted([*before, "ctx://resources/fz/a.md"])


def test_a_non_strict_upload_lists_chunk_and_directory_failures(live, service, tenants):
    files = [
        ("files", ("a.md", OK.encode())),
        ("files", ("big.md", long_doc().encode())),
        ("files", ("clash.md", CLASH.encode())),
    ]

    def upload(strict: bool, target: str = "ctx://resources/fz/up/") -> httpx.Response:
        return httpx.post(
            f"{live.url}/api/v1/resources/upload",
            files=files,
            data={"target_uri": target, "strict": str(strict).lower()},
            headers=tenants.admin,
            timeout=120,
        )

    service.add_text("# Inner\n\nBelow a directory.", "ctx://resources/fz/up/clash.md/in.md", ACME_ADMIN)
    before = stored(service, "ctx://resources/")
    strict = upload(True)
    assert strict.status_code == 409 and strict.json()["code"] == "WRT-4091", strict.text  # checked first
    strict = upload(True, "ctx://resources/fz/up2/")  # no directory in the way: the chunk limit
    assert strict.status_code == 413 and strict.json()["code"] == "WRT-4132", strict.text
    assert stored(service, "ctx://resources/") == before
    r = upload(False)
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["uris"] == ["ctx://resources/fz/up/a.md"]
    assert [(f["path"], f["code"]) for f in report["failures"]] == [("big.md", "WRT-4132"), ("clash.md", "WRT-4091")]
    assert all("ce-upload-" not in f["error"] for f in report["failures"])  # never the staging folder
    assert stored(service, "ctx://resources/") == sorted([*before, "ctx://resources/fz/up/a.md"])
