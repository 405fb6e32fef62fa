"""The Pulumi config keys Trainyard reads: the structured platform, and each credential in its own secret key
(never inside trainyard:platform: Pulumi returns secrets in `require_object` as plaintext)."""

PROJECT = "trainyard"
PLATFORM_KEY = f"{PROJECT}:platform"
KUBECONFIG_KEY = f"{PROJECT}:kubeconfig"
# The object store's credentials file for Velero (its `cloud` key).
CREDENTIALS_KEY = f"{PROJECT}:backupCredentials"
# Alertmanager's webhook receiver URL (it usually embeds a token), and Grafana's admin password.
ALERT_WEBHOOK_KEY = f"{PROJECT}:alertWebhookUrl"
GRAFANA_PASSWORD_KEY = f"{PROJECT}:grafanaAdminPassword"
# The front door (infra/spec/frontdoor/model.py): the secret of the OIDC client registered at the identity provider
# (or of Google's OAuth client that Dex uses), the password Dex binds to the LDAP directory with, and a laptop's
# static users' bcrypt hashes (a YAML mapping of username to hash).
OIDC_CLIENT_SECRET_KEY = f"{PROJECT}:oidcClientSecret"
LDAP_BIND_PASSWORD_KEY = f"{PROJECT}:ldapBindPassword"
STATIC_USER_HASHES_KEY = f"{PROJECT}:staticUserHashes"
# Kubeflow Pipelines (infra/spec/pipelines/model.py): its MySQL root password (never the archive's empty one); the
# SeaweedFS admin key of the pipeline-definitions store is derived from it.
PIPELINES_DB_PASSWORD_KEY = f"{PROJECT}:pipelinesDbPassword"
# Model Registry (infra/spec/models/model.py): the MySQL root password of every team's registry database, each
# derived from it per team (never the archive's `test`).
MODEL_REGISTRY_DB_PASSWORD_KEY = f"{PROJECT}:modelRegistryDbPassword"
# What the offline engine hands the program for every secret value: it never sees the real ones.
OFFLINE_MASK = "[secret]"
SECRET_KEYS = (KUBECONFIG_KEY, CREDENTIALS_KEY, ALERT_WEBHOOK_KEY, GRAFANA_PASSWORD_KEY, OIDC_CLIENT_SECRET_KEY,
               LDAP_BIND_PASSWORD_KEY, STATIC_USER_HASHES_KEY, PIPELINES_DB_PASSWORD_KEY,
               MODEL_REGISTRY_DB_PASSWORD_KEY)


def multikueue_key(worker: str) -> str:
    """The secret key holding the kubeconfig the manager's Kueue uses for a worker (docs/hybrid.md): a
    ServiceAccount token, no exec plugin, no token file."""
    return f"{PROJECT}:multikueue-{worker}"


def is_multikueue_key(key: str) -> bool:
    return key.startswith(f"{PROJECT}:multikueue-")
