"""What the database must show for the writes of the load: every acknowledged write is there, no
write took effect twice, and a retried write got its first answer again (not a conflict with
itself).

The rows are read once per check (the tables are small) and each write is looked up in them.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from dataclasses import dataclass, field

from load import Ledger, Write

#: The answers a retried write gets when its first attempt took effect but the server did not
#: replay that attempt's answer (no Idempotency-Key support): the write conflicts with itself.
SELF_CONFLICTS = {"username_taken", "challenge_used"}
#: A right answer to a retry of a write that never took effect: a device login retried past its
#: challenge's lifetime (60 s) is refused, and the app asks for a new challenge.
REFUSED_LATE = {"challenge_expired"}


@dataclass
class Findings:
    checked: int = 0
    acknowledged: int = 0
    lost: list[str] = field(default_factory=list)  # acknowledged, not in the database
    duplicated: list[str] = field(default_factory=list)  # took effect more than once, never retried
    duplicated_by_retry: list[str] = field(default_factory=list)  # a retry took effect again
    not_replayed: list[str] = field(default_factory=list)  # retried, answered as a conflict with itself
    unexpected: list[str] = field(default_factory=list)  # refused for another reason
    refused_late: int = 0  # retried past a challenge's lifetime, never took effect

    def without(self, seen: set[str]) -> "Findings":
        """These findings less those in `seen` (reported before), which then holds all of them."""
        fresh = Findings(self.checked, self.acknowledged)
        for name in ("lost", "duplicated", "duplicated_by_retry", "not_replayed", "unexpected"):
            setattr(fresh, name, [item for item in getattr(self, name) if item not in seen])
            seen.update(getattr(self, name))
        return fresh

    def problems(self, tolerate_non_idempotent_retries: bool) -> list[str]:
        """What fails the check. Tolerated on request: what retries do to a server without
        Idempotency-Key (a retry that takes effect again, or is answered as a conflict)."""
        out = []
        if self.lost:
            out.append(f"{len(self.lost)} acknowledged writes are not in the database: " + "; ".join(self.lost[:5]))
        if self.duplicated:
            out.append(f"{len(self.duplicated)} writes sent once took effect more than once: "
                       + "; ".join(self.duplicated[:5]))
        if self.duplicated_by_retry and not tolerate_non_idempotent_retries:
            out.append(f"{len(self.duplicated_by_retry)} retried writes took effect more than once (Idempotency-Key "
                       "not honoured): " + "; ".join(self.duplicated_by_retry[:5]))
        if self.not_replayed and not tolerate_non_idempotent_retries:
            out.append(f"{len(self.not_replayed)} retried writes took effect but the retry was answered as a "
                       "conflict, not with the first answer (Idempotency-Key not honoured): "
                       + "; ".join(self.not_replayed[:5]))
        if self.unexpected:
            out.append(f"{len(self.unexpected)} writes were refused unexpectedly: " + "; ".join(self.unexpected[:5]))
        return out


def _answer(write: Write) -> dict:
    try:
        answer = json.loads(write.final.body)
    except (ValueError, AttributeError):
        return {}
    return answer if isinstance(answer, dict) else {}


def _describe(write: Write) -> str:
    attempts = ", ".join(f"{a.status or a.code}{'' if a.status is None or a.status < 400 else '/' + str(a.code)}"
                         f"@{'AB'[a.instance]}" for a in write.attempts[-4:])
    return (f"{write.kind} {write.path} {write.redacted_body()[:120]} key {write.key[:8]}… [{attempts}] "
            f"from {write.attempts[0].utc} UTC")


def check(node, ledger: Ledger, only: set[str] | None = None) -> Findings:
    """Checks the finished writes of `ledger` (those whose keys are in `only`, if given) against
    `node`'s database. Each is taken as it is before the rows are read (a write acknowledged
    after that is not checked this time), and the writes that could have made the rows are
    counted after."""
    writes = [dataclasses.replace(w, attempts=list(w.attempts)) for w in ledger.snapshot()
              if w.done and (only is None or w.key in only)]
    users = {row[0]: row[1] for row in node.sql("SELECT username, id FROM users")}
    sessions = node.sql("SELECT id, user_id, client_id, device_id, auth_method FROM sessions")
    session_ids = {row[0] for row in sessions}
    # A device login's session has the client_id of the password login that bound the device.
    password_sessions = Counter((row[1], row[2]) for row in sessions if row[4] == "password")
    device_sessions = Counter(row[3] for row in sessions if row[4] == "device")
    devices = node.sql("SELECT id, public_key FROM devices")
    device_ids = {row[0] for row in devices}
    devices_per_key = Counter(row[1] for row in devices)
    approvals = node.sql("SELECT id, device_id, action, status FROM approvals")
    approval_status = {row[0]: row[3] for row in approvals}
    approvals_per_to: Counter = Counter()
    for _, device_id, action, _ in approvals:
        try:
            approvals_per_to[(device_id, json.loads(action).get("to"))] += 1
        except (ValueError, AttributeError):
            pass
    every = [w for w in ledger.snapshot() if w.kind == "device_login"]
    device_logins = Counter(w.facts["device_id"] for w in every)
    device_retried = {w.facts["device_id"] for w in every if w.retried}

    findings = Findings()
    for write in writes:
        if not write.attempts:
            continue
        findings.checked += 1
        acked = write.acknowledged
        findings.acknowledged += acked
        answer = _answer(write) if acked else {}
        facts = write.facts
        kind = write.kind
        # How many rows the write made, and whether the row its answer names is there.
        if kind == "signup":
            count = 1 if facts["username"] in users else 0
            named, present = answer.get("user_id"), users.get(facts["username"]) == answer.get("user_id")
        elif kind == "login":
            count = password_sessions[(facts["user_id"], facts["client_id"])]
            named = answer.get("session_id")
            present = named in session_ids
        elif kind == "bind":
            count = devices_per_key[facts["public_key"]]
            named = answer.get("device_id")
            present = named in device_ids
        elif kind == "approval":
            count = approvals_per_to[(facts["device_id"], facts["to"])]
            named = answer.get("approval_id")
            present = named in approval_status
        elif kind == "confirm":
            named = f"{facts['approval_id']} approved (it is {approval_status.get(facts['approval_id'])})"
            present = approval_status.get(facts["approval_id"]) == "approved"
            count = 1 if present else 0
        elif kind == "device_login":
            # Sessions are counted per device below. Each challenge is this write's own: used,
            # it was used by an earlier attempt of this write.
            count = 1 if write.retried and write.final.code == "challenge_used" else 0
            named = answer.get("session_id")
            present = named in session_ids
        else:
            continue
        if acked and not present:
            findings.lost.append(f"{_describe(write)}: {named} not found")
        if count > 1:
            (findings.duplicated_by_retry if write.retried else findings.duplicated).append(
                f"{_describe(write)}: {count} rows")
        final = write.final
        if acked or final.status is None or final.status == 503:
            continue
        if write.retried and count >= 1 and final.code in SELF_CONFLICTS:
            findings.not_replayed.append(_describe(write))
        elif write.retried and count == 0 and final.code in REFUSED_LATE:
            findings.refused_late += 1
        else:
            findings.unexpected.append(f"{_describe(write)}: {final.body[:200]}")
    for device_id, logins in device_logins.items():
        if device_sessions[device_id] > logins:
            (findings.duplicated_by_retry if device_id in device_retried else findings.duplicated).append(
                f"device {device_id}: {device_sessions[device_id]} device sessions for {logins} device logins")
    return findings
