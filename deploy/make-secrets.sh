#!/usr/bin/env bash
# Write the secrets of deploy/compose.scale-out.yaml once, with random passwords, readable by their owner only.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p secrets && chmod 700 secrets
[ -e secrets/postgres_password ] && { echo "deploy/secrets/ exists; remove it to start again" >&2; exit 1; }
umask 077
rand() { python3 -c 'import secrets; print(secrets.token_urlsafe(24), end="")'; }
pw=$(rand)
printf '%s' "$pw" > secrets/postgres_password
printf 'postgresql+psycopg://ce:%s@postgres:5432/ce' "$pw" > secrets/ce_metadata__url
printf 'ce-%s' "$(python3 -c 'import secrets; print(secrets.token_hex(6), end="")')" > secrets/ce_content__s3_access_key_id
rand > secrets/ce_content__s3_secret_access_key
chmod 644 secrets/*   # the containers' users (uid 10001, postgres, minio) read them through the secrets mount
echo "wrote deploy/secrets/ (git-ignored)"
