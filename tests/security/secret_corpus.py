"""A corpus of fake secrets, one per kind, in the formats real ones have (issue 14). Every value is made up here:
it matches its format (prefix, alphabet, length) and most spell FAKE or EXAMPLE, so none is a live credential.

``SECRETS`` lists ``(kind, line, secret)``: the line as it would appear in a runbook or config, and the part that
must never come back from any surface. ``DOCUMENT`` is a markdown runbook holding all of them.
"""

from __future__ import annotations

_HEX64 = "fa4e" * 16
_B64_KEY = "FAKEa2V5Zm9ydGVzdHNvbmx5bm90YXJlYWxrZXk" + "EXAMPLEZmFrZWZha2VmYWtlZmFrZQ=="
_PEM_BODY = "\n".join(["MIIEFAKEpAIBAAKCAQEAfakefakefakeFAKEkeyEXAMPLEonlyForTests0123456789"] * 3)

SECRETS: list[tuple[str, str, str]] = [
    # labelled forms an attack pass found unredacted
    (
        "aws_secret_in_prose",
        "and the aws secret access key wJalrFAKEutnFEMI/K7MDENG/bPxRfiCYPROSEKEY for the backup bucket",
        "wJalrFAKEutnFEMI/K7MDENG/bPxRfiCYPROSEKEY",
    ),
    ("api_key_label", "api key: fakeApiKey0example77", "fakeApiKey0example77"),
    ("curl_basic_user", "curl -u admin:FakeCurlPassw0rd https://api.example.com/v1", "FakeCurlPassw0rd"),
    ("mysql_cli_password", "mysql -u root -pFakeMysqlPassw0rd shop", "FakeMysqlPassw0rd"),
    ("session_cookie", "Cookie: session=fakeSessionCookie0123456789", "fakeSessionCookie0123456789"),
    ("aws_access_key_id", "aws_access_key_id = AKIAFAKE0EXAMPLE1234", "AKIAFAKE0EXAMPLE1234"),
    (
        "aws_secret_access_key",
        "aws_secret_access_key = wJalrFAKEutnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrFAKEutnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    (
        "gcp_api_key",
        "GOOGLE_MAPS_KEY AIzaSyFAKE0EXAMPLE0fakeFAKE0exampleKey1",
        "AIzaSyFAKE0EXAMPLE0fakeFAKE0exampleKey1",
    ),
    (
        "gcp_service_account_key",
        '"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvFAKEgIBADANBgkqhkiG9w0EXAMPLE'
        '\\n-----END PRIVATE KEY-----\\n"',
        "MIIEvFAKEgIBADANBgkqhkiG9w0EXAMPLE",
    ),
    (
        "gcp_oauth_client_secret",
        "client id 123.apps, secret GOCSPX-FAKEexample0123456789abcd",
        "GOCSPX-FAKEexample0123456789abcd",
    ),
    (
        "azure_storage_connection_string",
        f"DefaultEndpointsProtocol=https;AccountName=fakeacct;AccountKey={_B64_KEY};EndpointSuffix=core.windows.net",
        _B64_KEY,
    ),
    (
        "azure_client_secret",
        "AZURE_CLIENT_SECRET=Fak8Q~EXAMPLEsecretValue0123456789abcd",
        "Fak8Q~EXAMPLEsecretValue0123456789abcd",
    ),
    (
        "azure_sas_token",
        "https://fakeacct.blob.core.windows.net/c?sv=2022-11-02&sig=FAKEsigEXAMPLE0123456789abcdefXYZ%3D",
        "FAKEsigEXAMPLE0123456789abcdefXYZ%3D",
    ),
    (
        "github_pat_classic",
        "token: ghp_FAKE0EXAMPLE0fake0example0FAKE01234",
        "ghp_FAKE0EXAMPLE0fake0example0FAKE01234",
    ),
    (
        "github_pat_fine_grained",
        "GH github_pat_11FAKE0EXAMPLE_fakeFineGrainedToken0123456789abcdef",
        "github_pat_11FAKE0EXAMPLE_fakeFineGrainedToken0123456789abcdef",
    ),
    ("gitlab_pat", "CI uses glpat-FAKEexample0123456789 to clone", "glpat-FAKEexample0123456789"),
    (
        "slack_bot_token",
        "SLACK xoxb-000000000000-0000000000000-FAKEexampleFAKEexample00",
        "xoxb-000000000000-0000000000000-FAKEexampleFAKEexample00",
    ),
    (
        "slack_webhook",
        "alerts go to https://hooks.slack.com/services/T00FAKE00/B00FAKE00/FAKEexampleWebhook000000",
        "T00FAKE00/B00FAKE00/FAKEexampleWebhook000000",
    ),
    ("stripe_secret_key", "stripe sk_live_FAKE0EXAMPLE0fake0example00", "sk_live_FAKE0EXAMPLE0fake0example00"),
    (
        "sendgrid_key",
        "mail SG.FAKEexample0123456.FAKEexample0123456789abcdefghijkl",
        "SG.FAKEexample0123456.FAKEexample0123456789abcdefghijkl",
    ),
    ("twilio_key", "twilio SKfa4efa4efa4efa4efa4efa4efa4efa4e", "SKfa4efa4efa4efa4efa4efa4efa4efa4e"),
    (
        "npm_token",
        "//registry.npmjs.org/:_authToken=npm_FAKEexample0FAKEexample0FAKEexample00",
        "npm_FAKEexample0FAKEexample0FAKEexample00",
    ),
    ("digitalocean_token", f"DO token dop_v1_{_HEX64}", f"dop_v1_{_HEX64}"),
    (
        "jwt",
        "session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJGQUtFIn0.FAKEsignatureEXAMPLE0123",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJGQUtFIn0.FAKEsignatureEXAMPLE0123",
    ),
    ("password_in_yaml", "  password: Fake-Passw0rd-Yaml", "Fake-Passw0rd-Yaml"),
    ("password_in_env", 'DB_PASSWORD="Fake-Env-Passw0rd"', "Fake-Env-Passw0rd"),
    ("password_in_prose", "the admin password is FakeProsePassw0rd for now", "FakeProsePassw0rd"),
    (
        "rsa_private_key",
        f"-----BEGIN RSA PRIVATE KEY-----\n{_PEM_BODY}\n-----END RSA PRIVATE KEY-----",
        "MIIEFAKEpAIBAAKCAQEAfakefakefakeFAKEkeyEXAMPLEonlyForTests0123456789",
    ),
    ("postgres_url", "DATABASE_URL postgres://app:FakePgPassw0rd@db.internal:5432/app", "FakePgPassw0rd"),
    ("mysql_url", "mysql://root:FakeMyPassw0rd@10.0.0.5:3306/shop", "FakeMyPassw0rd"),
    ("mongodb_url", "mongodb+srv://svc:FakeMongoPassw0rd@cluster0.example.net/db", "FakeMongoPassw0rd"),
    ("redis_url", "cache at redis://:FakeRedisPassw0rd@redis.internal:6379/0", "FakeRedisPassw0rd"),
    ("basic_auth_url", "probe https://admin:FakeBasicPassw0rd@grafana.internal/api", "FakeBasicPassw0rd"),
    ("basic_auth_header", "Authorization: Basic RkFLRXVzZXI6RkFLRXBhc3N3b3Jk", "RkFLRXVzZXI6RkFLRXBhc3N3b3Jk"),
    ("bearer_header", "Authorization: Bearer FAKEbearerEXAMPLEtoken0123456789", "FAKEbearerEXAMPLEtoken0123456789"),
    ("chinese_password", "数据库密码：FakeZhPassw0rd", "FakeZhPassw0rd"),
]

#: One runbook holding every secret; its first lines carry some (so L0 and L1 see them), the rest are in sections.
DOCUMENT = (
    "# Payment service credentials runbook\n\n"
    + "The admin password is FakeProsePassw0rd for now and AKIAFAKE0EXAMPLE1234 deploys it.\n\n"
    + "\n\n".join(f"## {kind.replace('_', ' ')}\n\nSet it like this:\n\n{line}\n" for kind, line, _ in SECRETS)
)

#: A memory that states a password: its add-memory URI (the slug) must not spell it.
MEMORY = "My vault password is FakeVaultPassw0rd and the redis url is redis://:FakeRedisPassw0rd@cache:6379"
MEMORY_SECRETS = ["FakeVaultPassw0rd", "FakeRedisPassw0rd"]
