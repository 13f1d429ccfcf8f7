"""``serve --workers N`` hands its settings to the worker processes through the ``CE_*`` environment: what a worker
rebuilds with ``load_settings()`` is what ``serve`` resolved (the home, the bind address and the upload roots)."""

from __future__ import annotations

from context_engine.interfaces.cli.server_commands import WORKER_APP_FACTORY, settings_environment
from context_engine.settings import load_settings


def test_the_worker_environment_rebuilds_the_same_settings(tmp_path, monkeypatch):
    roots = (tmp_path / "a b", tmp_path / "c")
    http = {"host": "0.0.0.0", "port": 9001, "allowed_upload_roots": roots}
    parent = load_settings(tmp_path / "home", http=http)
    env = settings_environment(parent, http)
    assert env["CE_HOME"] == str(parent.home_path)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    worker = load_settings()
    assert worker.home_path == parent.home_path
    assert worker.http == parent.http
    assert worker.http.allowed_upload_roots == roots


def test_the_worker_app_factory_is_importable_by_name():
    module, _, name = WORKER_APP_FACTORY.partition(":")
    factory = getattr(__import__(module, fromlist=[name]), name)
    assert callable(factory) and factory.__name__ == "create_app_from_environment"
