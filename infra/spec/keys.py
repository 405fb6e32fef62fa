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
SECRET_KEYS = (KUBECONFIG_KEY, CREDENTIALS_KEY, ALERT_WEBHOOK_KEY, GRAFANA_PASSWORD_KEY)
