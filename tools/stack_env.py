"""The compose stack's secrets (deploy/compose/.env): generated once, never committed, read by
docker-compose beside the compose file. ``make stack-up`` writes it when missing; the stack's test
writes its own into a temporary directory.

    python -m tools.stack_env deploy/compose/.env [--port 8080]
"""

from __future__ import annotations

import argparse
import base64
import os
import secrets
from pathlib import Path

ADMIN = "admin"


def stack_env(port: int = 8080) -> dict[str, str]:
    """Fresh secrets for one stack: the metadata DB's password, the API's JWT secret, Airflow's
    Fernet key and the admin's password (the simple auth manager's)."""
    return {
        "POSTGRES_PASSWORD": secrets.token_urlsafe(18),
        "AIRFLOW_JWT_SECRET": secrets.token_urlsafe(32),
        "AIRFLOW_FERNET_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),
        "DLBENCH_ADMIN_USER": ADMIN,
        "DLBENCH_ADMIN_PASSWORD": secrets.token_urlsafe(12),
        "DLBENCH_API_PORT": str(port),
        "DLBENCH_API_BASE_URL": f"http://127.0.0.1:{port}",
    }


def write_env(path: Path, port: int = 8080) -> dict[str, str]:
    """Write a new env file at ``path`` (mode 600) and return its values."""
    values = stack_env(port)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args()
    write_env(args.path, args.port)
    print(f"wrote {args.path} (secrets for the compose stack; keep it private)")


if __name__ == "__main__":
    main()
