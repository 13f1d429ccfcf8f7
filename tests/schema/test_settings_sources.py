"""Settings sources (settings.py): the environment, secrets files under ``CE_SECRETS_DIR`` and config.toml, and
secrets never shown by a settings repr or dump (issue 13)."""

from __future__ import annotations

import pytest

from context_engine.errors import ContextEngineError
from context_engine.settings import load_settings


def test_secrets_come_from_files_named_like_their_variables(tmp_path, monkeypatch):
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "ce_vector__milvus__token").write_text("root:Milvus-s3cret")
    (secrets / "ce_metadata__url").write_text("postgresql+psycopg://ce:pg-s3cret@db.internal:5432/ce")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text('[metadata]\nurl = "sqlite:////tmp/from-toml.db"\n')
    monkeypatch.setenv("CE_SECRETS_DIR", str(secrets))
    settings = load_settings(tmp_path / "home")
    assert settings.vector.milvus.token is not None
    assert settings.vector.milvus.token.get_secret_value() == "root:Milvus-s3cret"
    url = settings.metadata.url
    assert url is not None and url.get_secret_value() == "postgresql+psycopg://ce:pg-s3cret@db.internal:5432/ce"
    for secret in ("Milvus-s3cret", "pg-s3cret"):  # files beat config.toml; neither secret in a repr or a dump
        assert secret not in repr(settings) and secret not in settings.model_dump_json()
    monkeypatch.setenv("CE_METADATA__URL", "sqlite:////tmp/from-env.db")  # the environment beats the files
    assert load_settings(tmp_path / "home").metadata.url.get_secret_value() == "sqlite:////tmp/from-env.db"


def test_a_missing_secrets_directory_is_a_configuration_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CE_SECRETS_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(ContextEngineError) as err:
        load_settings(tmp_path / "home")
    assert err.value.code == "CFG-4001" and "nowhere" in err.value.message


def test_the_storage_settings_reject_unknown_backends(tmp_path):
    with pytest.raises(ContextEngineError) as err:
        load_settings(tmp_path, vector={"backend": "faiss"})
    assert err.value.code == "CFG-4001" and "vector.backend" in err.value.message


@pytest.mark.parametrize("url", ["file://relative/path", "file:relative", "file://host.example/abs"])
def test_a_file_content_url_must_name_an_absolute_path(tmp_path, url):
    from context_engine.settings import Settings
    from context_engine.storage.factory import open_content

    with pytest.raises(ContextEngineError) as err:
        open_content(Settings(home=tmp_path, content={"url": url}))
    assert err.value.code == "CFG-4001" and "content.url" in err.value.message
    assert not (tmp_path / "path").exists()
