"""The base of every settings section: frozen, unknown keys rejected (STYLE.md, Config)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["SettingsSection"]


class SettingsSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
