"""The front door's stack field and the web access derived from the team groups (infra/spec/frontdoor/model.py,
web_access.py): each bad input refused with one line naming the field (exit 2, nothing run), its nearest valid
neighbour accepted."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from infra.commands import main
from infra.spec import PLATFORM_KEY, SpecError, validate
from infra.spec.input.keys import LDAP_BIND_PASSWORD_KEY, OIDC_CLIENT_SECRET_KEY, STATIC_USER_HASHES_KEY
from infra.spec.teams import CI_SERVICE_ACCOUNT
from tests.conftest import raw_platform, write_config

Edit = Callable[[dict[str, Any]], None]

LDAP = {"host": "ldap.lab.example.com:636", "bindDN": "cn=dex,ou=services,dc=lab,dc=example,dc=com",
        "userSearch": {"baseDN": "ou=people,dc=lab,dc=example,dc=com", "filter": "(objectClass=person)"},
        "groupSearch": {"baseDN": "ou=groups,dc=lab,dc=example,dc=com"}}
OIDC = {"issuerUrl": "https://login.example.com", "clientId": "trainyard-web"}


def _lab(door: dict[str, Any] | None = None) -> dict[str, Any]:
    """onprem-lab with a front door (an LDAP directory through Dex, the corporate CA)."""
    raw = raw_platform("onprem-lab")
    raw["frontDoor"] = door or {"host": "ml.lab.example.com", "tls": {"ca": {"secretName": "corp-ca"}},
                                "identityProvider": {"ldap": copy.deepcopy(LDAP)}}
    return raw


def _set(path: str, value: Any) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for key in parents:
            raw = raw[key]
        raw[last] = value
    return edit


def _delete(path: str) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for key in parents:
            raw = raw[key]
        del raw[last]
    return edit


def _refusal(raw: dict[str, Any], stack: str = "onprem-lab") -> SpecError:
    with pytest.raises(SpecError) as caught:
        validate(raw, stack)
    return caught.value


# (case, the refused edit, its nearest valid neighbour, the field path, words of the fix)
CASES: list[tuple[str, Edit, Edit, str, tuple[str, ...]]] = [
    ("no tls", _delete("frontDoor.tls"), _set("frontDoor.tls", {"secretName": "ml-tls"}),
     "frontDoor.tls", ("without TLS", "acme", "secretName")),
    ("tls with no source", _set("frontDoor.tls", {}), _set("frontDoor.tls", {"acme": {"email": "ops@example.com"}}),
     "frontDoor.tls", ("exactly one",)),
    ("tls with two sources", _set("frontDoor.tls", {"secretName": "a", "ca": {"secretName": "b"}}),
     _set("frontDoor.tls", {"ca": {"secretName": "b"}}), "frontDoor.tls", ("exactly one", "ca and secretName")),
    ("issuer over http", _set("frontDoor.identityProvider", {"oidc": {**OIDC, "issuerUrl": "http://login.example.com"}}),
     _set("frontDoor.identityProvider", {"oidc": OIDC}), "frontDoor.identityProvider.oidc.issuerUrl", ("https://",)),
    ("issuer with a query", _set("frontDoor.identityProvider",
                                 {"oidc": {**OIDC, "issuerUrl": "https://login.example.com/?tenant=a"}}),
     _set("frontDoor.identityProvider", {"oidc": {**OIDC, "issuerUrl": "https://login.example.com/tenant/v2.0"}}),
     "frontDoor.identityProvider.oidc.issuerUrl", ("query",)),
    ("ACME directory over http", _set("frontDoor.tls", {"acme": {"email": "ops@example.com",
                                                                  "server": "http://acme.example.com/directory"}}),
     _set("frontDoor.tls", {"acme": {"email": "ops@example.com", "server": "https://acme.example.com/directory"}}),
     "frontDoor.tls.acme.server", ("https://",)),
    ("host not a DNS name", _set("frontDoor.host", "ml_lab.example.com"), _set("frontDoor.host", "ml-lab.example.com"),
     "frontDoor.host", ("not a fully qualified DNS name",)),
    ("host of one label", _set("frontDoor.host", "ml"), _set("frontDoor.host", "ml.lab"),
     "frontDoor.host", ("fully qualified",)),
    ("host a wildcard", _set("frontDoor.host", "*.lab.example.com"), _set("frontDoor.host", "x.lab.example.com"),
     "frontDoor.host", ("wildcard",)),
    ("host with a port", _set("frontDoor.host", "ml.lab.example.com:8443"),
     _set("frontDoor.host", "ml.lab.example.com"), "frontDoor.host", ("port", "443")),
    ("host a URL", _set("frontDoor.host", "https://ml.lab.example.com"), _set("frontDoor.host", "ml.lab.example.com"),
     "frontDoor.host", ("URL",)),
    ("host in capitals", _set("frontDoor.host", "ML.lab.example.com"), _set("frontDoor.host", "ml.lab.example.com"),
     "frontDoor.host", ("lowercase",)),
    ("host an address", _set("frontDoor.host", "10.0.0.1"), _set("frontDoor.host", "10-0-0-1.lab.example.com"),
     "frontDoor.host", ("IP address",)),
    ("two teams share a group", _set("teams.nlp.groups.analysts", ["vision-read"]),
     _set("teams.nlp.groups.analysts", ["nlp-read"]), "teams.nlp.groups.analysts", ("vision", "its own group")),
    ("two teams' engineers share a group", _set("teams.speech.groups.engineers", ["nlp-eng"]),
     _set("teams.speech.groups.engineers", ["speech-eng"]), "teams.speech.groups.engineers", ("nlp's engineers",)),
    ("a group two personas of one team", _set("teams.vision.groups.analysts", ["vision-eng"]),
     _set("teams.vision.groups.analysts", ["vision-read"]), "teams.vision.groups.analysts", ("one persona",)),
    ("a CI group also the team's engineers", _set("teams.vision.groups.ci", ["vision-eng"]),
     _set("teams.vision.groups.ci", ["vision-ci"]), "teams.vision.groups.ci", ("one persona",)),
    ("two identity providers", _set("frontDoor.identityProvider", {"ldap": LDAP, "oidc": OIDC}),
     _set("frontDoor.identityProvider", {"oidc": OIDC}), "frontDoor.identityProvider",
     ("exactly one", "oidc and ldap")),
    ("Google's issuer directly", _set("frontDoor.identityProvider",
                                      {"oidc": {**OIDC, "issuerUrl": "https://accounts.google.com"}}),
     _set("frontDoor.identityProvider", {"google": {"clientId": "c", "hostedDomains": ["example.com"],
                                                    "adminEmail": "admin@example.com"}}),
     "frontDoor.identityProvider.oidc.issuerUrl", ("no groups", "google")),
    ("LDAP in plaintext", _set("frontDoor.identityProvider.ldap.tls", "none"),
     _set("frontDoor.identityProvider.ldap.tls", "startTLS"), "frontDoor.identityProvider.ldap.tls", ("startTLS",)),
    ("LDAP host without a port", _set("frontDoor.identityProvider.ldap.host", "ldap.lab.example.com"),
     _set("frontDoor.identityProvider.ldap.host", "10.1.2.3:389"), "frontDoor.identityProvider.ldap.host",
     ("host:port",)),
    ("static users on a shared cluster", _set("frontDoor.identityProvider", {"staticUsers": [
        {"email": "ada@example.com", "username": "ada", "groups": ["vision-eng"]}]}),
     _set("frontDoor.identityProvider", {"ldap": LDAP}), "frontDoor.identityProvider.staticUsers", ("laptop",)),
    ("ACME dns01 without a zone", _set("frontDoor.tls", {"acme": {"email": "ops@example.com", "solver": "dns01"}}),
     _set("frontDoor.tls", {"acme": {"email": "ops@example.com", "solver": "dns01", "dnsZone": "Z0123"}}),
     "frontDoor.tls.acme.dnsZone", ("dns01",)),
]


@pytest.mark.parametrize(("refused", "accepted", "path", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refused_with_its_path_and_the_neighbour_accepted(refused: Edit, accepted: Edit, path: str,
                                                          words: tuple[str, ...]) -> None:
    raw = _lab()
    refused(raw)
    error = _refusal(raw)
    assert error.path == f"{PLATFORM_KEY}.{path}", str(error)
    for word in words:
        assert word in error.message, f"{word!r} not in {error.message!r}"
    raw = _lab()
    accepted(raw)
    assert validate(raw, "onprem-lab").front_door is not None


@pytest.mark.usefixtures("nothing_runs")
@pytest.mark.parametrize(("config", "words"), [
    ({PLATFORM_KEY: _lab(_lab()["frontDoor"] | {"tls": None})}, ("frontDoor.tls", "without TLS")),
    ({PLATFORM_KEY: _lab(_lab()["frontDoor"] | {"host": "*.example.com"})}, ("frontDoor.host", "wildcard")),
    # a client secret inside the platform object, which Pulumi would hand back in plaintext
    ({PLATFORM_KEY: _lab(_lab()["frontDoor"] | {"identityProvider": {"oidc": {**OIDC, "clientSecret": "s3cr3t"}}})},
     ("frontDoor.identityProvider.oidc.clientSecret", "secret")),
    # the secret key itself, not encrypted
    ({PLATFORM_KEY: _lab(), OIDC_CLIENT_SECRET_KEY: "s3cr3t"}, (OIDC_CLIENT_SECRET_KEY, "must be a secret")),
    # a static user's bcrypt hash written into the stack file
    ({PLATFORM_KEY: _lab(_lab()["frontDoor"] | {"identityProvider": {"staticUsers": [
        {"email": "ada@example.com", "username": "ada", "groups": ["vision-eng"],
         "hash": "$2y$12$4K/VkmDd1q1Orb3xAt82zu8gk7Ad6ReFR4LCP9UeYE90NLiN9Df72"}]}})},
     ("staticUsers[0].hash", "bcrypt")),
], ids=["no tls", "wildcard host", "client secret in the platform", "client secret key in plaintext",
        "bcrypt hash in the file"])
def test_cli_exits_2_with_one_line(config: dict[str, Any], words: tuple[str, ...], tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", str(write_config(tmp_path, config, "door"))])
    out, err = capsys.readouterr()
    assert code == 2, err + out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err + out, err
    for word in words:
        assert word in lines[0], f"{word!r} not in {lines[0]!r}"


def test_secret_keys_encrypted_are_accepted(tmp_path: Path) -> None:
    from infra.spec.input.load import load_file

    secure = {"secure": "v1:abc"}
    config = {PLATFORM_KEY: _lab(), OIDC_CLIENT_SECRET_KEY: secure, LDAP_BIND_PASSWORD_KEY: secure,
              STATIC_USER_HASHES_KEY: secure}
    assert load_file(write_config(tmp_path, config, "door")).front_door is not None


def test_web_rights_follow_the_kubectl_personas() -> None:
    """Engineers edit and analysts read their own team only; CI groups get no web right (the namespace's
    ServiceAccount token instead); platform admins hold admin everywhere."""
    door = validate(_lab(), "onprem-lab").front_door
    assert door is not None
    rights = {(g.group, g.team, g.right, g.namespaces) for g in door.grants}
    # each team's namespaces, its models namespace last (the stack declares `models`)
    assert ("vision-eng", "vision", "edit", ("vision", "vision-models")) in rights
    assert ("vision-read", "vision", "read", ("vision", "vision-models")) in rights
    assert ("research-leads", "nlp", "read", ("nlp", "nlp-models")) in rights
    assert ("speech-eng", "speech", "edit", ("speech", "speech-eval", "speech-models")) in rights
    assert ("platform-admins", "", "admin", ()) in rights
    assert not door.grants_of("vision-ci"), "a CI group signs nobody in on the web"
    assert {g.team for g in door.grants_of("vision-eng")} == {"vision"}, "no other team's namespaces"
    assert ("vision", CI_SERVICE_ACCOUNT) in door.machine_accounts
    assert ("speech-eval", CI_SERVICE_ACCOUNT) in door.machine_accounts
    assert door.platform_admins == ("platform-admins",)
    assert [ui.name for ui in door.uis] == ["grafana", "pipelines"] and door.uis[0].roles["read"].startswith("Viewer")


def test_a_platform_admin_group_that_is_also_a_team_group_holds_both() -> None:
    """Decided: accepted, the rights add up (admin everywhere and the team's edit), as on kubectl."""
    raw = _lab()
    raw["identity"]["platformAdmins"] = ["platform-admins", "vision-eng"]
    door = validate(raw, "onprem-lab").front_door
    assert door is not None
    assert {(g.persona, g.right) for g in door.grants_of("vision-eng")} == {("platform-admin", "admin"),
                                                                            ("ml-engineer", "edit")}


def test_no_grafana_no_ui() -> None:
    raw = _lab()
    raw["observability"] = {"grafana": False}
    raw.pop("pipelines")
    door = validate(raw, "onprem-lab").front_door
    assert door is not None and door.uis == ()


@pytest.mark.parametrize(("provider", "dex", "issuer", "callback", "key"), [
    ({"ldap": LDAP}, True, "https://ml.lab.example.com/dex", None, LDAP_BIND_PASSWORD_KEY),
    ({"oidc": OIDC}, False, "https://login.example.com", "https://ml.lab.example.com/oauth2/callback",
     OIDC_CLIENT_SECRET_KEY),
    ({"google": {"clientId": "c", "hostedDomains": ["example.com"], "adminEmail": "admin@example.com"}}, True,
     "https://ml.lab.example.com/dex", "https://ml.lab.example.com/dex/callback", OIDC_CLIENT_SECRET_KEY),
], ids=["ldap", "oidc", "google"])
def test_sign_in_facts(provider: dict[str, Any], dex: bool, issuer: str, callback: str | None, key: str) -> None:
    raw = _lab()
    raw["frontDoor"]["identityProvider"] = provider
    door = validate(raw, "onprem-lab").front_door
    assert door is not None
    assert (door.dex, door.issuer, door.callback, door.secret_keys) == (dex, issuer, callback, (key,))


def _local(users: list[dict[str, Any]]) -> dict[str, Any]:
    raw = raw_platform("local")
    raw["frontDoor"] = {"host": "trainyard.localhost", "tls": {"ca": {"secretName": "local-ca"}},
                        "identityProvider": {"staticUsers": users}}
    return raw


def test_static_users_on_a_laptop_only_with_declared_groups() -> None:
    ada = {"email": "ada@example.com", "username": "ada", "groups": ["demo-eng"]}
    door = validate(_local([ada]), "local").front_door
    assert door is not None and door.secret_keys == (STATIC_USER_HASHES_KEY,)
    error = _refusal(_local([{**ada, "groups": ["demo-admins"]}]), "local")
    assert error.path == f"{PLATFORM_KEY}.frontDoor.identityProvider.staticUsers[0].groups"
    assert "demo-eng" in error.message
    error = _refusal(_local([ada, {**ada, "username": "bob"}]), "local")
    assert error.path == f"{PLATFORM_KEY}.frontDoor.identityProvider.staticUsers" and "email" in error.message


def test_same_issuer_as_the_cluster_login_reads_the_same_groups_claim() -> None:
    raw = raw_platform("aws-prod")
    login = raw["cluster"]["eks"]["login"]["oidc"]
    raw["frontDoor"] = {"host": "ml.example.com", "tls": {"acme": {"email": "ops@example.com"}},
                        "identityProvider": {"oidc": {"issuerUrl": login["issuerUrl"], "clientId": "web",
                                                      "groupsClaim": "roles"}}}
    error = _refusal(raw, "aws-prod")
    assert error.path == f"{PLATFORM_KEY}.frontDoor.identityProvider.oidc.groupsClaim"
    raw["frontDoor"]["identityProvider"]["oidc"]["groupsClaim"] = "groups"
    assert validate(raw, "aws-prod").front_door is not None
    raw["frontDoor"]["identityProvider"]["oidc"].update(issuerUrl="https://other.example.com", groupsClaim="roles")
    assert validate(raw, "aws-prod").front_door is not None, "another issuer may name its claim differently"


def test_several_clusters_the_door_is_the_managers() -> None:
    raw = raw_platform("hybrid-burst")
    raw["frontDoor"] = _lab()["frontDoor"]
    manager = validate(raw, "hybrid-burst")
    assert manager.front_door is not None and manager.hybrid is not None
    assert all(p.front_door is None for name, p in manager.hybrid.clusters.items() if name != manager.hybrid.manager)
    raw["clusters"]["core"]["frontDoor"] = raw.pop("frontDoor")
    error = _refusal(raw, "hybrid-burst")
    assert error.path == f"{PLATFORM_KEY}.clusters.core.frontDoor" and "top level" in error.message


def test_the_repository_stacks_validate() -> None:
    """Whatever they declare, every repository stack stays valid (the uniqueness of groups included)."""
    for stack in ("local", "onprem-lab", "aws-prod", "gcp-prod", "azure-prod", "hybrid-burst"):
        validate(raw_platform(stack), stack)
