"""Secret redaction: tokens, API keys, passwords, private keys, connection strings; ordinary text untouched."""

from __future__ import annotations

import pytest

from context_engine.observability.metrics import Metrics
from context_engine.retrieval.redaction import Redactor
from context_engine.settings import RedactionSettings


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor(RedactionSettings())


@pytest.mark.parametrize(
    ("line", "secret", "kind"),
    [
        ("password = hunter2Secret!", "hunter2Secret!", "credential"),
        ('db_password: "s3cr3t-value"', "s3cr3t-value", "credential"),
        ("export API_TOKEN=abcd1234efgh5678ijkl", "abcd1234efgh5678ijkl", "credential"),
        ("client_secret => 9f8e7d6c5b4a", "9f8e7d6c5b4a", "credential"),
        ("数据库密码：Zx9kk2233", "Zx9kk2233", "credential"),
        ("the admin password is Tr0ub4dor&3 for now", "Tr0ub4dor&3", "credential"),
        ("管理员密码是Qw3rty9876", "Qw3rty9876", "credential"),
        ("key id AKIAIOSFODNN7EXAMPLE in use", "AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
        ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "github_token"),
        ("glpat-abcdefghij0123456789", "glpat-abcdefghij0123456789", "gitlab_token"),
        ("slack xoxb-123456789012-abcdefghijkl", "xoxb-123456789012-abcdefghijkl", "slack_token"),
        ("OPENAI sk-proj-abcdefghijklmnopqrstuvwx", "sk-proj-abcdefghijklmnopqrstuvwx", "openai_key"),
        ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz123456", "abcdefghijklmnopqrstuvwxyz123456", "bearer_token"),
        ("postgres://admin:pa55w0rd@db:5432/app", "pa55w0rd", "connection_string"),
        ("amqp://guest:guest-secret@mq/", "guest-secret", "connection_string"),
        (
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijklmnop",
            "eyJhbGciOiJIUzI1NiJ9",
            "jwt",
        ),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----",
            "b3BlbnNzaC1rZXk",
            "private_key",
        ),
        ("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIIrY (truncated)", "MHcCAQEEIIrY", "private_key"),
        # labelled forms an attack pass found unredacted (issue 14)
        (
            "the aws secret access key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY for backups",
            "wJalrXUtnFEMI",
            "credential",
        ),
        ("Secret access key: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI", "credential"),
        ("AWS Secret Access Key [None]: wJalrXUtnFEMI/K7MDENG", "wJalrXUtnFEMI", "credential"),
        ("api key: abc123def456", "abc123def456", "credential"),
        ("API key is abc123def456", "abc123def456", "credential"),
        ("passphrase: correct-horse-9", "correct-horse-9", "credential"),
        ("Password for admin: Hunter22x", "Hunter22x", "credential"),
        ("Cookie: session=abcdef0123456789", "abcdef0123456789", "cookie"),
        ("curl -u admin:S3cr3tPassw0rd https://api.example.com", "S3cr3tPassw0rd", "cli_password"),
        ("mysql -u root -pS3cr3tPassw0rd app", "S3cr3tPassw0rd", "cli_password"),
        ("docker login -u me -p S3cr3tPassw0rd registry.example.com", "S3cr3tPassw0rd", "cli_password"),
        ("<password>S3cr3t!x</password>", "S3cr3t!x", "credential"),
    ],
)
def test_secrets_are_replaced(redactor, line, secret, kind):
    out = redactor.redact(f"Some context.\n{line}\nMore context.")
    assert secret not in out.text
    assert f"[REDACTED:{kind}]" in out.text
    assert out.text.startswith("Some context.\n")
    assert out.count >= 1 and kind in out.kinds


@pytest.mark.parametrize(
    "text",
    [
        "Check the pod logs with `kubectl logs -p`.",
        "The token expires in 24 hours.",
        "Password rotation is required.",
        "image: quay.io/prometheus/node-exporter@sha256:"
        "4f1c2b3a4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8",
        "See https://example.com/docs/runbooks/KubePodCrashLooping for details.",
        "容器频繁重启：Pod 中的容器反复退出。",
        "Set `password: <your password>` in the config file.",
        "The metrics-collector's `ServiceAccount` token is invalid or not yet mounted.",
        "Check which secret is being used: the `thanos-object-storage` secret is misconfigured.",
        "secretKeyRef:\n  key: name",
        "The api key rotation is monthly; rotate the secret key every 90 days.",
        "Check the secret access key permissions in IAM.",
        "Run `mysql -p` and type the password at the prompt.",
        "curl -u $USER:$PASS https://api.example.com",
        "Open the login page.",
    ],
)
def test_ordinary_text_is_left_alone(redactor, text):
    out = redactor.redact(text)
    assert out.text == text and out.count == 0


def test_patterns_only_mode_and_disabled(redactor):
    assert "[REDACTED" in redactor.redact("password=abc12345", library=False).text
    assert Redactor(RedactionSettings(enabled=False)).redact("password=abc12345").text == "password=abc12345"


def test_library_failure_degrades_to_patterns_and_is_counted(monkeypatch):
    metrics = Metrics()
    r = Redactor(RedactionSettings(), metrics)

    class Broken:
        def analyze_line(self, **kwargs):
            raise RuntimeError("plugin crashed")

    monkeypatch.setattr(r, "_plugins", [Broken()])
    out = r.redact("password=abc12345\nfine")
    assert out.text == "password=[REDACTED:credential]\nfine"
    assert metrics.registry.get_sample_value("ce_retrieval_fallback_total", {"code": "RET-5005"}) == 1
