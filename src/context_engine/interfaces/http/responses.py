"""The JSON response of every API route and error envelope: secrets redacted last (docs/security.md "Secret
redaction").

The service redacts each text where it is produced (L2 with both layers, abstracts and titles with the patterns...);
:class:`RedactedJSONResponse` then passes every string of the answer, keys included, through
:func:`context_engine.redaction.redact_output` before it is encoded, so a field that no call redacts (a breadcrumb, a
URI segment, a metadata value, a speaker, an echoed query) cannot return a secret. It is the app's
``default_response_class`` while ``retrieval.redaction.enabled`` is on (the read-time switch); error envelopes are
always rendered through it, as log lines are always redacted.
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from context_engine.redaction import redact_output


class RedactedJSONResponse(JSONResponse):
    """``JSONResponse`` whose content has every string redacted by the patterns before it is encoded."""

    def render(self, content: Any) -> bytes:
        return super().render(redact_output(content))
