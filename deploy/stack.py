#!/usr/bin/env python3
"""The production stack on one machine, in one command (`make prod`).

DEBUG off, PostgreSQL and Redis on this machine, secrets generated once into
REPLAY_STACK_DIR/secrets/ (owner-only, never committed), `migrate` and `collectstatic`, then
gunicorn (static files served by WhiteNoise), a Celery worker and Celery beat, each in its own
session. It waits for /healthz, says where the console is, and supervises: Ctrl-C (SIGINT) or
SIGTERM stops all three; if one of them dies, it stops the others and exits 1.

Plain http on 127.0.0.1 (REPLAY_INSECURE_LOCALHOST=1): put a TLS proxy in front for anything
else, and drop that variable (docs/deployment.md).

Environment (each has a default for this machine):
  REPLAY_STACK_DIR       var/prod                       state: secrets, blobs, static files
  REPLAY_STACK_PORT      8080                           gunicorn listens on 127.0.0.1:PORT
  REPLAY_STACK_PG        postgres://postgres@127.0.0.1:5432   the server (its database below)
  REPLAY_STACK_DATABASE  replay_prod                    created when missing
  REPLAY_STACK_REDIS     redis://127.0.0.1:6379/0       the Celery broker
  WEB_CONCURRENCY        2 per core + 1                 gunicorn workers
  REPLAY_STACK_WORKER_CONCURRENCY  2                    Celery worker processes
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
STOP_SECONDS = 30


def say(message: str) -> None:
    print(f"[stack] {message}", flush=True)


def secret_file(directory: Path, name: str) -> Path:
    """A random secret in an owner-only file, made once."""
    path = directory / name
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(48))
    return path


def database_ensure(server: str, name: str) -> str:
    import psycopg
    from psycopg import sql

    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            say(f"created database {name}")
    return f"{server}/{name}"


def stack_env(args: argparse.Namespace) -> dict[str, str]:
    state = Path(args.dir).resolve()
    private = state / "secrets"
    private.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o700)
    os.chmod(private, 0o700)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY_FILE": str(secret_file(private, "django_secret_key")),
        "REPLAY_KEY_ENCRYPTION_KEY_FILE": str(secret_file(private, "key_encryption_key")),
        "REPLAY_PRIVACY_MASTER_KEY_FILE": str(secret_file(private, "privacy_master_key")),
        "REPLAY_PRIVACY_SECRET_FILE": str(secret_file(private, "privacy_secret")),
        "DATABASE_URL": database_ensure(args.pg, args.database),
        "DATABASE_CONN_MAX_AGE": "60",
        "CELERY_BROKER_URL": args.redis,
        "REPLAY_VAR_DIR": str(state),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "REPLAY_INSECURE_LOCALHOST": "1",
        "REPLAY_LOG_FORMAT": "json",
        "GUNICORN_BIND": f"127.0.0.1:{args.port}",
        "GUNICORN_CONTROL_SOCKET": str(state / "gunicorn.ctl"),
        "PYTHONUNBUFFERED": "1",
    }
    for name in (
        "DJANGO_SECRET_KEY",
        "REPLAY_KEY_ENCRYPTION_KEY",
        "REPLAY_PRIVACY_MASTER_KEY",
        "REPLAY_PRIVACY_SECRET",
        "DJANGO_ALLOW_ASYNC_UNSAFE",
    ):
        env.pop(name, None)  # the files above are the secrets
    env.pop("REPLAY_TASK_RUNNER", None)  # a broker is set: Celery runs the replays
    return env


def manage(env: dict[str, str], *argv: str) -> None:
    subprocess.run([PYTHON, "manage.py", *argv], cwd=ROOT, env=env, check=True)


def start(env: dict[str, str], args: argparse.Namespace) -> dict[str, subprocess.Popen]:
    state = Path(env["REPLAY_VAR_DIR"])
    commands = {
        "web": [PYTHON, "-m", "gunicorn", "-c", str(ROOT / "deploy" / "gunicorn.conf.py")],
        "worker": [
            PYTHON, "-m", "celery", "-A", "console", "worker", "--loglevel", "INFO",
            "--concurrency", os.environ.get("REPLAY_STACK_WORKER_CONCURRENCY", "2"),
            "-n", f"stack-{args.port}@%h",
        ],
        "beat": [
            PYTHON, "-m", "celery", "-A", "console", "beat", "--loglevel", "INFO",
            "--schedule", str(state / "celerybeat-schedule"),
        ],
    }  # fmt: skip
    return {
        name: subprocess.Popen(argv, cwd=ROOT, env=env, start_new_session=True)
        for name, argv in commands.items()
    }


def healthy(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=5) as response:  # noqa: S310
            return json.load(response)
    except (urllib.error.URLError, OSError, ValueError):
        return None


def stop(children: dict[str, subprocess.Popen]) -> None:
    for process in children.values():
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_SECONDS
    for name, process in children.items():
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            say(f"{name} did not stop in {STOP_SECONDS}s: killing it")
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


class Stop(Exception):
    pass


def _raise_stop(signum, frame):
    raise Stop(signal.Signals(signum).name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=os.environ.get("REPLAY_STACK_DIR", str(ROOT / "var/prod")))
    parser.add_argument(
        "--port", type=int, default=int(os.environ.get("REPLAY_STACK_PORT", "8080"))
    )
    parser.add_argument(
        "--pg", default=os.environ.get("REPLAY_STACK_PG", "postgres://postgres@127.0.0.1:5432")
    )
    parser.add_argument(
        "--database", default=os.environ.get("REPLAY_STACK_DATABASE", "replay_prod")
    )
    parser.add_argument(
        "--redis", default=os.environ.get("REPLAY_STACK_REDIS", "redis://127.0.0.1:6379/0")
    )
    parser.add_argument(
        "--demo", action="store_true", help="create the demo users and traces (manage.py demo)"
    )
    args = parser.parse_args()

    env = stack_env(args)
    say(f"state in {env['REPLAY_VAR_DIR']}, database {args.database}, broker {args.redis}")
    manage(env, "migrate", "--noinput")
    manage(env, "collectstatic", "--noinput", "-v", "0")
    if args.demo:
        credentials = Path(env["REPLAY_VAR_DIR"]) / "secrets" / "demo-users.json"
        manage(env, "demo", "--allow-production", "--credentials", str(credentials))

    signal.signal(signal.SIGINT, _raise_stop)
    signal.signal(signal.SIGTERM, _raise_stop)
    children: dict[str, subprocess.Popen] = {}
    url = f"http://127.0.0.1:{args.port}"
    try:
        children = start(env, args)
        deadline = time.monotonic() + 120
        while (health := healthy(url)) is None or health["failed"]:
            if time.monotonic() > deadline:
                say(f"not healthy after 120s: {health}")
                return 1
            if any(p.poll() is not None for p in children.values()):
                break
            time.sleep(0.5)
        else:
            say(f"ready: {url}  (health: {url}/healthz; Ctrl-C stops web, worker and beat)")
        while True:
            for name, process in children.items():
                if process.poll() is not None:
                    say(f"{name} exited with {process.returncode}: stopping the stack")
                    return 1
            time.sleep(0.5)
    except Stop as why:
        say(f"{why}: stopping web, worker and beat")
        return 0
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop(children)
        say("stopped")


if __name__ == "__main__":
    sys.exit(main())
