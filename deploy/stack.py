#!/usr/bin/env python3
"""The production stack on one machine, in one command (`make prod`).

DEBUG off, PostgreSQL and Redis on this machine, secrets generated once into
REPLAY_STACK_DIR/secrets/ (owner-only, never committed), `migrate` and `collectstatic`, then
gunicorn (static files served by WhiteNoise), a Celery worker and Celery beat, each in its own
session.

Least privilege (docs/deployment.md, "PostgreSQL role"): the server's superuser only creates
two roles and the database; `migrate` runs as the owner role (<database>_owner), which then
applies the application role's grants (the marked block of docs/deployment.md), and every
other process (the demo fill, gunicorn, the worker, beat) connects as the limited application
role (<database>_app), which cannot switch the append-only guards off. Every file the stack
and its processes write is owner-only (umask 077).

It waits for /healthz (asked with the monitoring token it generates), says where the console
is, and supervises: Ctrl-C (SIGINT) or SIGTERM stops all three; if one of them dies, it stops
the others and exits 1.

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
  REPLAY_STACK_SEAWEED   0                              1: blobs on SeaweedFS (--seaweed)
  REPLAY_STACK_SEAWEED_PORTS  8330-8337                 its eight ports (deploy/seaweed.py)

With --seaweed the stack also starts SeaweedFS (deploy/seaweed.py) with its state under
REPLAY_STACK_DIR/seaweed and keeps every blob in its bucket: gunicorn gets the application's
S3 keys (no deletes), the worker and beat the retention identity's too (retention deletes
expired bytes); SeaweedFS is supervised like the other three.
"""

from __future__ import annotations

import argparse
import json
import os
import re
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


GRANTS_MARK = re.compile(r"<!-- app-role-grants.*?-->\s*```sql\n(.*?)```", re.S)
#: the application role's rights, as docs/deployment.md gives them (its test runs them too)
GRANTS_DOC = ROOT / "docs" / "deployment.md"


def app_role_grants(role: str) -> list[str]:
    """The marked GRANT block of docs/deployment.md, for ``role``, one statement a string."""
    block = GRANTS_MARK.search(GRANTS_DOC.read_text(encoding="utf-8"))
    if block is None:
        raise SystemExit(f"{GRANTS_DOC}: the marked app-role-grants block is missing")
    sql = "\n".join(
        line for line in block.group(1).splitlines() if not line.lstrip().startswith("--")
    )
    return [
        re.sub(r"\breplay_app\b", role, statement.strip())
        for statement in sql.split(";")
        if statement.strip()
    ]


def _with_credentials(server: str, user: str, password: str, database: str) -> str:
    """``server`` (postgres://anyone@host:port) as ``user`` with ``password``, on ``database``."""
    from urllib.parse import quote, urlsplit

    parts = urlsplit(server)
    host = parts.hostname or "127.0.0.1"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{quote(user)}:{quote(password, safe='')}@{host}{port}/{database}"


def database_ensure(server: str, name: str, private: Path) -> tuple[str, str]:
    """The database and its two roles, made or brought into line with the secrets; the
    owner's and the application's URLs. Run as the server's superuser (``server``), which
    nothing else in the stack connects as."""
    import psycopg
    from psycopg import sql

    owner, app = f"{name}_owner", f"{name}_app"
    passwords = {
        owner: secret_file(private, "database_owner_password").read_text().strip(),
        app: secret_file(private, "database_app_password").read_text().strip(),
    }
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        for role, password in passwords.items():
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone()
            verb = "ALTER" if exists else "CREATE"
            conn.execute(
                sql.SQL(
                    "{} ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION "
                    "NOBYPASSRLS NOINHERIT PASSWORD {}"
                ).format(sql.SQL(verb), sql.Identifier(role), sql.Literal(password))
            )
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(name), sql.Identifier(owner)
                )
            )
            say(f"created database {name} (owner {owner})")
        conn.execute(
            sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
                sql.Identifier(name), sql.Identifier(owner)
            )
        )
    with psycopg.connect(f"{server}/{name}", autocommit=True) as conn:
        # a database an earlier stack made as the superuser: hand its schema to the owner
        conn.execute(sql.SQL("ALTER SCHEMA public OWNER TO {}").format(sql.Identifier(owner)))
        for kind, objects in (
            ("TABLE", "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"),
            ("SEQUENCE", "SELECT sequencename FROM pg_sequences WHERE schemaname = 'public'"),
            ("VIEW", "SELECT viewname FROM pg_views WHERE schemaname = 'public'"),
        ):
            for (obj,) in conn.execute(objects).fetchall():
                conn.execute(
                    sql.SQL("ALTER {} {} OWNER TO {}").format(
                        sql.SQL(kind), sql.Identifier(obj), sql.Identifier(owner)
                    )
                )
        # the project's functions (the append-only triggers'), not an extension's: pg_trgm's
        # (made by replay's migration 0011) stay as CREATE EXTENSION made them
        functions = conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n"
            " ON n.oid = p.pronamespace WHERE n.nspname = 'public' AND NOT EXISTS ("
            "SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass"
            " AND d.objid = p.oid AND d.deptype = 'e')"
        ).fetchall()
        for (signature,) in functions:
            conn.execute(
                sql.SQL("ALTER FUNCTION {} OWNER TO {}").format(
                    sql.SQL(signature), sql.Identifier(owner)
                )
            )
        conn.execute("REVOKE ALL ON SCHEMA public FROM PUBLIC")
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(sql.Identifier(app)))
        conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(sql.Identifier(name)))
        conn.execute(
            sql.SQL("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}").format(
                sql.Identifier(name), sql.Identifier(app)
            )
        )
    return (
        _with_credentials(server, owner, passwords[owner], name),
        _with_credentials(server, app, passwords[app], name),
    )


def app_role_grant(owner_url: str, app_url: str) -> None:
    """As the owner, after `migrate`: the application role's rights on every table."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(app_url) as conn:
        app = conn.info.user
    with psycopg.connect(owner_url, autocommit=True) as conn:
        for statement in app_role_grants(app):
            conn.execute(sql.SQL(statement))  # type: ignore[arg-type]


def owner_only(state: Path) -> None:
    """Files an earlier run left readable by others (a beat schedule written before the
    umask, say) made owner-only; directories 0700."""
    for path in [state, *state.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            os.chmod(path, mode & 0o700)


def stack_env(args: argparse.Namespace) -> tuple[dict[str, str], str]:
    """The processes' environment (as the application role) and the owner's database URL."""
    state = Path(args.dir).resolve()
    private = state / "secrets"
    private.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o700)
    os.chmod(private, 0o700)
    owner_only(state)
    owner_url, app_url = database_ensure(args.pg, args.database, private)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY_FILE": str(secret_file(private, "django_secret_key")),
        "REPLAY_KEY_ENCRYPTION_KEY_FILE": str(secret_file(private, "key_encryption_key")),
        "REPLAY_PRIVACY_MASTER_KEY_FILE": str(secret_file(private, "privacy_master_key")),
        "REPLAY_PRIVACY_SECRET_FILE": str(secret_file(private, "privacy_secret")),
        "REPLAY_MONITORING_TOKEN_FILE": str(secret_file(private, "monitoring_token")),
        "DATABASE_URL": app_url,
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
        "REPLAY_MONITORING_TOKEN",
        "DJANGO_ALLOW_ASYNC_UNSAFE",
    ):
        env.pop(name, None)  # the files above are the secrets
    env.pop("REPLAY_TASK_RUNNER", None)  # a broker is set: Celery runs the replays
    return env, owner_url


def witnesses_line(env: dict[str, str]) -> str:
    """What the stack says about witnesses: none is started here, on purpose (a witness the
    operator runs, with a key the operator holds, cannot vouch for the operator)."""
    if (env.get("GOVERNANCE_WITNESSES") or "").strip() not in ("", "[]"):
        quorum = env.get("GOVERNANCE_WITNESS_QUORUM", "1")
        return f"witnesses: GOVERNANCE_WITNESSES, quorum {quorum} (each new checkpoint is pushed)"
    return (
        "witnesses: none (GOVERNANCE_WITNESSES is empty): checkpoints carry this server's "
        "signature only; have witnesses run by someone else (docs/deployment.md#witnesses)"
    )


def manage(env: dict[str, str], *argv: str) -> None:
    subprocess.run([PYTHON, "manage.py", *argv], cwd=ROOT, env=env, check=True)


def start(
    env: dict[str, str], args: argparse.Namespace, background_env: dict[str, str] | None = None
) -> dict[str, subprocess.Popen]:
    """gunicorn with ``env``; the worker and beat with ``background_env`` added."""
    state = Path(env["REPLAY_VAR_DIR"])
    background = {**env, **(background_env or {})}
    commands = {
        "web": [PYTHON, "-m", "gunicorn", "-c", str(ROOT / "deploy" / "gunicorn.conf.py")],
        "worker": [
            PYTHON, "-m", "celery", "-A", "config", "worker", "--loglevel", "INFO",
            "--concurrency", os.environ.get("REPLAY_STACK_WORKER_CONCURRENCY", "2"),
            "-n", f"stack-{args.port}@%h",
        ],
        "beat": [
            PYTHON, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO",
            "--schedule", str(state / "celerybeat-schedule"),
        ],
    }  # fmt: skip
    return {
        name: subprocess.Popen(
            argv, cwd=ROOT, env=env if name == "web" else background, start_new_session=True
        )
        for name, argv in commands.items()
    }


def healthy(url: str, token: str) -> dict | None:
    """/healthz's details, asked with the monitoring token (anyone else gets a status)."""
    request = urllib.request.Request(  # noqa: S310
        f"{url}/healthz", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310
            return json.load(response)
    except urllib.error.HTTPError as failing:  # 503: which checks failed
        try:
            return json.load(failing)
        except ValueError:
            return None
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
    parser.add_argument(
        "--seaweed",
        action=argparse.BooleanOptionalAction,
        default=os.environ.get("REPLAY_STACK_SEAWEED", "0") == "1",
        help="start SeaweedFS and keep the blobs there (deploy/seaweed.py)",
    )
    parser.add_argument(
        "--seaweed-ports", default=os.environ.get("REPLAY_STACK_SEAWEED_PORTS", "8330-8337")
    )
    args = parser.parse_args()

    os.umask(0o077)  # every file this script and its processes write: owner-only
    env, owner_url = stack_env(args)
    say(f"state in {env['REPLAY_VAR_DIR']}, database {args.database}, broker {args.redis}")
    say(witnesses_line(env))
    store = None
    background_env: dict[str, str] = {}
    # from here on a stop request stops SeaweedFS too (it runs in its own session)
    signal.signal(signal.SIGINT, _raise_stop)
    signal.signal(signal.SIGTERM, _raise_stop)
    try:
        if args.seaweed:
            import seaweed

            store = seaweed.start(
                Path(env["REPLAY_VAR_DIR"]) / "seaweed",
                seaweed.Ports.parse(args.seaweed_ports),
                "replay-blobs",
            )
            env.update(store.app_env(retention=False))
            background_env = store.app_env(retention=True)
            say(f"blobs on SeaweedFS: {store.endpoint}, bucket {store.bucket}")
        return _serve(args, env, owner_url, background_env, store)
    except Stop as why:  # before the three were started (migrate, the demo fill)
        say(f"{why}: stopping")
        return 0
    finally:
        if store is not None:
            store.stop()


def _serve(args, env, owner_url, background_env, store) -> int:
    manage({**env, "DATABASE_URL": owner_url}, "migrate", "--noinput")
    app_role_grant(owner_url, env["DATABASE_URL"])
    manage(env, "collectstatic", "--noinput", "-v", "0")
    if args.demo:
        credentials = Path(env["REPLAY_VAR_DIR"]) / "secrets" / "demo-users.json"
        manage(env, "demo", "--allow-production", "--credentials", str(credentials))

    signal.signal(signal.SIGINT, _raise_stop)
    signal.signal(signal.SIGTERM, _raise_stop)
    children: dict[str, subprocess.Popen] = {}
    url = f"http://127.0.0.1:{args.port}"
    try:
        children = start(env, args, background_env)
        if store is not None:
            children["seaweed"] = store.process
        deadline = time.monotonic() + 120
        token = Path(env["REPLAY_MONITORING_TOKEN_FILE"]).read_text().strip()
        while (health := healthy(url, token)) is None or health["failed"]:
            if time.monotonic() > deadline:
                say(f"not healthy after 120s: {health}")
                return 1
            if any(p.poll() is not None for p in children.values()):
                break
            time.sleep(0.5)
        else:
            say(f"ready: {url}  (health: {url}/healthz; Ctrl-C stops web, worker and beat)")
        ticks = 0
        while True:
            for name, process in children.items():
                if process.poll() is not None:
                    say(f"{name} exited with {process.returncode}: stopping the stack")
                    return 1
            time.sleep(0.5)
            ticks += 1
            if store is not None and ticks % 10 == 0:
                store.tighten()  # volume files weed writes 0644 when it grows a volume
    except Stop as why:
        say(f"{why}: stopping web, worker and beat")
        return 0
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop({name: p for name, p in children.items() if name != "seaweed"})  # it goes last
        say("stopped")


if __name__ == "__main__":
    sys.exit(main())
