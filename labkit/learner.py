"""Whose is it: the learner id that every name a lesson gives a thing on a shared cluster carries.

A room of learners on one cluster (``RAY_ADDRESS``) shares its Serve applications and their
routes, its named actors and any folder they all write to: a second learner's
``serve.run(app, name="digits")`` would replace the first one's app while it is being measured,
and each one's clean-up would delete the other's. So a lesson names such a thing with
:func:`own`: ``own("digits")`` is ``"digits.ana"`` for the learner ``ana``, and its route is
``"/" + own("digits")``; a lesson's clean-up deletes the names it made.

The id is ``LABKIT_LEARNER`` when it is set (an instructor hands each participant one), else the
user name plus a short random suffix, made once and kept in ``.labkit/learner-<user>`` beside the
kit's process records, so a restarted kernel (or tomorrow's) finds its own apps again. An id is
lower-case letters, digits and ``-``, so no id ends another one's ``.id`` suffix.

Used in: 02, 09, 11, 13.
"""

from __future__ import annotations

import getpass
import os
import re
import secrets
from pathlib import Path
from typing import Any

ENV = "LABKIT_LEARNER"
VALID = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")


def _user() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no user name for this uid (some containers)
        user = ""
    return re.sub(r"[^a-z0-9-]+", "-", user.lower()).strip("-")[:20] or "learner"


def _kept() -> Path:
    """This user's kept id: one file per user, so users who share a clone do not share an id."""
    from labkit.runtime import procs

    return procs.registry_path().parent / f"learner-{_user()}"


def learner_id() -> str:
    """This learner's id: ``LABKIT_LEARNER``, else the one kept in ``.labkit/learner-<user>``
    (made there the first time). Raises ``ValueError`` naming the rule for an id that breaks it."""
    raw = os.environ.get(ENV, "").strip()
    if raw:
        if not VALID.fullmatch(raw):
            raise ValueError(
                f"{ENV}={raw!r}: a learner id is 1-32 lower-case letters, digits and '-', "
                "starting with a letter or digit (e.g. ana or team-3)"
            )
        return raw
    kept = _kept()
    for _ in range(3):
        try:
            said = kept.read_text().strip()
        except FileNotFoundError:
            said = ""
        if VALID.fullmatch(said):
            return said
        if said:
            kept.unlink(missing_ok=True)  # spoilt by hand: a new id takes its place
        made = f"{_user()}-{secrets.token_hex(2)}"
        kept.parent.mkdir(parents=True, exist_ok=True)
        tmp = kept.with_name(f".{kept.name}.{secrets.token_hex(4)}")
        tmp.write_text(made + "\n")
        try:
            os.link(tmp, kept)  # whole or not at all; a kernel that got there first wins
            return made
        except FileExistsError:
            continue  # another kernel made one just now: read it
        finally:
            tmp.unlink(missing_ok=True)
    raise RuntimeError(f"cannot keep a learner id in {kept}")


def own(name: str) -> str:
    """``name`` made this learner's: ``own("digits")`` is ``"digits.<learner id>"``. For Serve
    apps (and ``"/" + own(...)`` for their routes), named actors, run names and shared files."""
    if not name or "/" in name:
        raise ValueError(f"own({name!r}): give a plain name such as 'digits'")
    return f"{name}.{learner_id()}"


def runtime_env(env: dict[str, Any] | None = None) -> dict[str, Any]:
    """``env`` with ``LABKIT_LEARNER`` among its ``env_vars``: the job's workers and replicas
    know the id, and the cluster's job table shows whose session a driver is."""
    env = dict(env or {})
    env["env_vars"] = {**env.get("env_vars", {}), ENV: learner_id()}
    return env


def others(session: Any) -> list[str]:
    """The other sessions on ``session``'s cluster now: each live driver but this one, as its
    learner id (or where it runs, for a driver that did not say). Empty for a local session."""
    if session.mode != "cluster" or not session.dashboard_url:
        return []
    import ray

    me = ray.get_runtime_context().get_job_id()
    found = []
    for job in session.dashboard_get("/api/jobs/"):  # the Jobs API: drivers and submitted jobs
        if job["type"] != "DRIVER" or job["status"] != "RUNNING" or job["job_id"] == me:
            continue
        env_vars = (job.get("runtime_env") or {}).get("env_vars") or {}
        driver = job.get("driver_info") or {}
        where = f"a driver on {driver.get('node_ip_address')} (pid {driver.get('pid')})"
        found.append(env_vars.get(ENV) or where)
    return sorted(found)


def line(session: Any) -> str:
    """One line for the lesson's output: this learner's id, and who else is on the cluster."""
    from labkit import lang

    text = lang.say(
        "learner: {id} (this lesson's Serve apps, routes, named actors and run names end in .{id})",
        id=learner_id(),
    )
    if session.mode == "cluster":
        try:
            seen = others(session)
        except Exception as exc:  # noqa: BLE001 - one line of output must not stop the lesson
            return text + lang.say("; other sessions on this cluster: not known ({why})", why=exc)
        text += lang.say(
            "; other sessions on this cluster now: {n}{names}",
            n=len(seen),
            names=f" ({', '.join(seen)})" if seen else "",
        )
    return text
