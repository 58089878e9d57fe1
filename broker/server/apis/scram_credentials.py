"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), version 0 (flexible): KIP-554, as
Kafka 2.7 serves them.

Credentials live in the metadata store at ``/config/users/<user>`` (see
:mod:`broker.sasl` for the layout), so every broker of the cluster serves the
same users; any broker answers both APIs.

DescribeUserScramCredentials: ``users`` null or empty describes every user
with a credential; each result lists the user's mechanisms (1 SCRAM-SHA-256,
2 SCRAM-SHA-512) and iteration counts, never salts or keys. A user named twice
gets DUPLICATE_RESOURCE, a user without any credential RESOURCE_NOT_FOUND.

AlterUserScramCredentials: deletions (user, mechanism) and upsertions (user,
mechanism, iterations, salt, salted password: the client derives the salted
password, so the password never reaches the broker). One result per user, in
the order the user first appears; a user with any error keeps its credentials
unchanged:

* an empty user name: UNACCEPTABLE_CREDENTIAL;
* a mechanism other than 1 or 2: UNSUPPORTED_SASL_MECHANISM;
* iterations outside 4096..16384 (Kafka's bounds), an empty salt or salted
  password: UNACCEPTABLE_CREDENTIAL;
* the same user and mechanism twice in one request: DUPLICATE_RESOURCE;
* deleting a credential that does not exist: RESOURCE_NOT_FOUND.

With an authorizer (:mod:`broker.acl`), Describe needs DESCRIBE and Alter
ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED (Describe's top-level
error; each user of Alter).
"""

from __future__ import annotations

from broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.protocol import ApiKey, ErrorCode
from broker.protocol.apis.cluster import SCRAM_MECHANISMS
from broker.sasl import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    desanitize_user,
    sanitize_user,
    scram_credentials,
)
from broker.server.context import RequestContext

_MECHANISM_IDS = {name: key for key, name in SCRAM_MECHANISMS.items()}  # "SCRAM-SHA-256" -> 1


def _credentials(metadata, user: str) -> dict[str, ScramCredential]:
    """Blocking: a user's SCRAM credentials by mechanism name."""
    return scram_credentials(metadata.user_config(sanitize_user(user)))


async def describe(ctx: RequestContext, request: dict) -> dict:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": "Cluster authorization failed.", "results": []}
    metadata = ctx.broker.metadata
    wanted = [u["name"] for u in request["users"] or []]

    def read() -> list[dict]:
        names = wanted or sorted(desanitize_user(n) for n in metadata.users())
        seen: set[str] = set()
        results = []
        for user in names:
            if user in seen:
                continue
            seen.add(user)
            if not user:
                results.append(_result(user, ErrorCode.RESOURCE_NOT_FOUND, "Username must not be empty"))
                continue
            if wanted.count(user) > 1:
                results.append(_result(user, ErrorCode.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for "
                                       f"the same user twice in a single request: {user}"))
                continue
            found = _credentials(metadata, user)
            if not found:
                if wanted:
                    results.append(_result(user, ErrorCode.RESOURCE_NOT_FOUND,
                                           f"Attempt to describe a user credential that does not exist: {user}"))
                continue
            results.append(_result(user, ErrorCode.NONE, None, [
                {"mechanism": _MECHANISM_IDS[name], "iterations": cred.iterations}
                for name, cred in sorted(found.items(), key=lambda item: _MECHANISM_IDS[item[0]])]))
        return results

    results = await ctx.broker.run_blocking(read)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "results": results}


def _result(user: str, code: int, message: str | None, infos: list | None = None) -> dict:
    return {"user": user, "error_code": code, "error_message": message, "credential_infos": infos or []}


def _check(change: dict, upsert: bool) -> tuple[int, str] | None:
    if not change["name"]:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if change["name"] in (".", ".."):
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Username {change['name']!r} cannot be stored"
    if change["mechanism"] not in SCRAM_MECHANISMS:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {change['mechanism']}"
    if upsert:
        if change["iterations"] < MIN_ITERATIONS:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too few iterations: at least {MIN_ITERATIONS}"
        if change["iterations"] > MAX_ITERATIONS:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too many iterations: at most {MAX_ITERATIONS}"
        if not change["salt"] or not change["salted_password"]:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "The salt and the salted password must not be empty"
    return None


async def alter(ctx: RequestContext, request: dict) -> dict:
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        users = list(dict.fromkeys(c["name"] for c in [*request["deletions"], *request["upsertions"]]))
        return {"throttle_time_ms": 0, "results": [
            {"user": user, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
             "error_message": "Cluster authorization failed."} for user in users]}
    metadata = ctx.broker.metadata
    changes = [(d, False) for d in request["deletions"]] + [(u, True) for u in request["upsertions"]]
    order: list[str] = []
    errors: dict[str, tuple[int, str]] = {}
    pairs: dict[tuple[str, int], int] = {}
    for change, _upsert in changes:
        if change["name"] not in order:
            order.append(change["name"])
        key = (change["name"], change["mechanism"])
        pairs[key] = pairs.get(key, 0) + 1
    for change, upsert in changes:
        user = change["name"]
        if user in errors:
            continue
        problem = _check(change, upsert)
        if problem is None and pairs[(user, change["mechanism"])] > 1:
            problem = (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
        if problem is not None:
            errors[user] = problem

    def write() -> dict[str, tuple[int, str]]:
        outcome = dict(errors)
        for user in order:
            if user in outcome:
                continue
            sanitized = sanitize_user(user)
            config = metadata.user_config(sanitized)
            for change, upsert in changes:
                if change["name"] != user:
                    continue
                mechanism = SCRAM_MECHANISMS[change["mechanism"]]
                if upsert:
                    config[mechanism] = ScramCredential.from_salted_password(
                        mechanism, change["salt"], change["salted_password"], change["iterations"]).encode()
                elif mechanism in config:
                    del config[mechanism]
                else:
                    outcome[user] = (ErrorCode.RESOURCE_NOT_FOUND,
                                     "Attempt to delete a user credential that does not exist")
                    break
            else:
                metadata.set_user_config(sanitized, config)
        return outcome

    outcome = await ctx.broker.run_blocking(write)
    results = []
    for user in order:
        code, message = outcome.get(user, (ErrorCode.NONE, None))
        results.append({"user": user, "error_code": code, "error_message": message})
    return {"throttle_time_ms": 0, "results": results}


def register(registry) -> None:
    registry.register(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, describe)
    registry.register(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, alter)
