"""The front door (docs/front-door.md): one gateway per stack where people sign in with the corporate directory and
reach the platform's web UIs under `https://<frontDoor.host>/`, built from the vendored Kubeflow Platform 26.03
(which folders, and each patch with its reason: infra/platform/frontdoor_patches.py; sign-in and secrets:
infra/platform/frontdoor_identity.py).

- cert-manager, and the host's certificate: a ClusterIssuer (ACME or the corporate CA) and a Certificate into the
  gateway's namespace, or the site's existing TLS Secret.
- Istio: CRDs, istio-system and istiod with the ingress gateway, whose Service is the stack's ONE web-facing entry
  (LoadBalancer; NodePort on a laptop). The gateway is a standalone Envoy; only Pipelines' pods (namespace
  `kubeflow`) carry sidecars, never a team's.
- oauth2-proxy, asked by the gateway about every browser request (CUSTOM AuthorizationPolicy, as upstream); the
  gateway verifies the resulting ID token (RequestAuthentication) and writes `kubeflow-userid` / `kubeflow-groups`
  from its claims, overwriting what a client sent; a DENY policy refuses any request without a verified token.
- Dex, only when it signs people in (ldap, staticUsers) or brokers Google.
- Each UI (Grafana today) through a VirtualService under its path, and a NetworkPolicy that lets only the gateway's
  pods reach the UI's port, so a pod inside the cluster cannot call the UI around the gateway with forged headers.
- Grafana signs people in from the forwarded ID token itself, each team in its organization
  (infra/platform/grafana/sso.py, grafana/orgs.py); with the corporate CA, a Certificate in its namespace gives it
  the CA to trust Dex's keys behind the host.

- Machines: the cluster's ServiceAccount tokens as a second rule of the gateway's RequestAuthentication (the vendored
  `m2m-token-issuer`'s, for the issuer of each cluster kind; the cluster-jwks-proxy where the keys are in-cluster),
  and the header guard: a token without the claim a header comes from cannot carry a client's header, and only the
  teams' `trainyard-ci` accounts are accepted (frontdoor_identity.py).
- Team access on the web: the web binder (web/binder.py), to which every UI request is mirrored.
- The IngressClass `istio` when cert-manager's ACME http01 solver needs one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.components import (
    CERT_MANAGER,
    DEX,
    GATEWAY_PEER,
    GATEWAY_POD_LABELS,
    ISTIO,
    MONITORING,
    OAUTH2_PROXY,
    PIPELINES,
)
from infra.kit.naming import named
from infra.kit.objects import NETWORKING_API, child_opts, kube_object, kustomize_directory, metadata
from infra.platform import frontdoor_identity as identity
from infra.platform.frontdoor_patches import (
    GATEWAY_REF,
    Patch,
    bind_to_gateway,
    delete,
    gateway_patches,
    istio_install_patches,
    istio_namespace_patches,
    json6902,
    merge,
    replace_config,
)
from infra.platform.grafana.sso import GRAFANA_CA_SECRET, trusts_corporate_ca
from infra.platform.web import binder as web_binder
from infra.spec import Platform, SpecError
from infra.spec.frontdoor.web_access import GRAFANA, JWKS_PROXY, FrontDoorFacts, WebUi
from infra.spec.versions import KUBECTL_IMAGE, KUBEFLOW_MANIFESTS
from infra.vocabulary import NAME_LABEL

CERT_MANAGER_API = "cert-manager.io/v1"
ISTIO_NETWORKING_API = "networking.istio.io/v1"
ISTIO_SECURITY_API = "security.istio.io/v1"
ISSUER = "trainyard-front-door"  # the ClusterIssuer of frontDoor.tls (acme, ca)
CERTIFICATE_SECRET = "front-door-tls"  # where cert-manager writes the host's certificate, in istio-system
# Grafana in kube-prometheus-stack: its Service port 80 forwards to the pod's 3000; the chart's pod labels.
GRAFANA_SERVICE = "kube-prometheus-stack-grafana"
GRAFANA_PORT = 3000
GRAFANA_POD_LABELS = {"app.kubernetes.io/name": "grafana", "app.kubernetes.io/instance": "kube-prometheus-stack"}
# Each UI's Service, port and pod port and labels, by its component (web_access.py WebUi.component).
UI_BACKENDS: dict[str, tuple[str, str, int, int, dict[str, str]]] = {
    "observability": (MONITORING.namespace, GRAFANA_SERVICE, 80, GRAFANA_PORT, GRAFANA_POD_LABELS),
    # Kubeflow Pipelines' UI (vendored Service ml-pipeline-ui: port 80 -> the pod's 3000).
    "pipelines": (PIPELINES.namespace, "ml-pipeline-ui", 80, 3000, {"app": "ml-pipeline-ui"})}
# Prometheus scrapes Grafana's /metrics on the same port (the chart's ServiceMonitor); its pods carry the
# operator's label.
PROMETHEUS_PEER = {"namespaceSelector": {"matchLabels": {NAME_LABEL: MONITORING.namespace}},
                   "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}
GATEWAY_PORTS = (8080, 8443)  # the gateway pods' ports behind the Service's 80 and 443
BINDER_DESTINATION = {"host": web_binder.SERVICE_HOST, "port": {"number": web_binder.SERVICE_PORT}}
# Istio serves Ingresses of this class (its mesh default ingressClass `istio`, ingressControllerMode STRICT):
# cert-manager's http01 solver Ingress names it (cluster_issuer), so the class must exist.
INGRESS_CLASS = "istio"
INGRESS_CONTROLLER = "istio.io/ingress-controller"
JWKS_PROXY_LABELS = {"app.kubernetes.io/name": JWKS_PROXY}


def tls_secret(facts: FrontDoorFacts) -> str:
    """The Secret in istio-system the gateway serves the host's certificate from."""
    tls = facts.spec.tls
    assert tls is not None
    return tls.secret_name or CERTIFICATE_SECRET


def dns01_provider(platform: Platform, zone: str) -> dict[str, Any]:
    """cert-manager's dns01 provider for the cloud's DNS (its ambient credentials: the pod's workload identity)."""
    cluster = platform.spec.cluster
    if cluster.gke is not None:
        return {"cloudDNS": {"project": cluster.gke.project}}
    if cluster.eks is not None:
        return {"route53": {"region": cluster.eks.region, "hostedZoneID": zone}}
    raise SpecError("frontDoor.tls.acme.solver", "dns01 writes into the cloud's DNS zone, which Trainyard configures "
                    f"on GKE (Cloud DNS) and EKS (Route 53), not on a {cluster.kind} cluster: use http01, ca or "
                    "secretName")


def cluster_issuer(platform: Platform, facts: FrontDoorFacts) -> dict[str, Any] | None:
    """The ClusterIssuer's spec for `acme` or `ca`, None for an existing Secret. http01 answers through the gateway
    (Istio serves Ingresses of class `istio`); dns01 writes the cloud's zone as cert-manager's identity."""
    tls = facts.spec.tls
    assert tls is not None
    if tls.ca is not None:
        return {"ca": {"secretName": tls.ca.secret_name}}
    if tls.acme is None:
        return None
    acme = tls.acme
    solver: dict[str, Any] = {"http01": {"ingress": {"ingressClassName": INGRESS_CLASS}}} if acme.solver == "http01" \
        else {"dns01": dns01_provider(platform, acme.dns_zone or ""), "selector": {"dnsNames": [facts.spec.host]}}
    return {"acme": {"email": acme.email, "server": acme.server, "solvers": [solver],
                     "privateKeySecretRef": {"name": f"{ISSUER}-account"}}}


def ui_route(ui: WebUi, binder: bool) -> dict[str, Any]:
    """The UI's route; with `binder`, each request is also mirrored to the web binder (fire and forget, the
    identity headers as the gateway wrote them), which keeps the person's web RoleBindings (web/binder.py)."""
    namespace, service, port, _, _ = UI_BACKENDS[ui.component]
    route = {"name": ui.name, "match": [{"uri": {"prefix": ui.path}}],
             "route": [{"destination": {"host": f"{service}.{namespace}.svc.cluster.local", "port": {"number": port}}}]}
    return {**route, "mirror": BINDER_DESTINATION} if binder else route


def web_access_route() -> dict[str, Any]:
    """/web-access/: the person's web rights, bound now and shown (the mirror binds on every UI request)."""
    return {"name": "web-access", "match": [{"uri": {"prefix": web_binder.WEB_ACCESS_PATH}}],
            "route": [{"destination": BINDER_DESTINATION}]}


def ui_ingress(ui: WebUi) -> tuple[str, dict[str, Any]]:
    """The UI's NetworkPolicy: its pods take traffic on its port from the gateway's pods (and Prometheus' scrape)
    only; being the only policy of its namespace that selects them, nothing else reaches them."""
    namespace, _, _, pod_port, labels = UI_BACKENDS[ui.component]
    return namespace, {"podSelector": {"matchLabels": labels}, "policyTypes": ["Ingress"],
                       "ingress": [{"from": [GATEWAY_PEER, PROMETHEUS_PEER],
                                    "ports": [{"protocol": "TCP", "port": pod_port}]}]}


def gateway_ingress() -> dict[str, Any]:
    """istio-system's vendored policies admit only its own pods and istiod's ports: the gateway's pods also take
    the web's traffic (from the load balancer or the node port, whose source address is anyone's)."""
    return {"podSelector": {"matchLabels": dict(GATEWAY_POD_LABELS)}, "policyTypes": ["Ingress"],
            "ingress": [{"ports": [{"protocol": "TCP", "port": port} for port in GATEWAY_PORTS]}]}


def oauth2_proxy_patches(facts: FrontDoorFacts) -> list[Patch]:
    """Our configuration file and parameters (Secure cookies; the issuer is trusted by its public certificate, not
    a self-signed one), our Secret instead of the placeholder one, the gateway's new place, the stack's issuer in
    the gateway's RequestAuthentication."""
    ns, upstream = OAUTH2_PROXY.namespace, OAUTH2_PROXY.name  # upstream names its objects as its namespace
    env = [{"name": variable, "valueFrom": {"secretKeyRef": {"name": identity.OAUTH2_SECRET, "key": key}}}
           for variable, key in (("OAUTH2_PROXY_CLIENT_ID", "client-id"),
                                 ("OAUTH2_PROXY_CLIENT_SECRET", "client-secret"),
                                 ("OAUTH2_PROXY_COOKIE_SECRET", "cookie-secret"))]
    deployment = {"template": {"spec": {"containers": [{"name": upstream, "env": env}]}}}
    return [replace_config(upstream, ns, "oauth2_proxy.cfg", identity.oauth2_proxy_config(facts)),
            merge("v1", "ConfigMap", "oauth2-proxy-parameters", ns,
                  data={"FORCE_HTTPS": "true", "ALLOW_SELF_SIGNED_ISSUER": "false"}),
            delete("Secret", upstream, ns),
            merge("apps/v1", "Deployment", upstream, ns, spec=deployment),
            bind_to_gateway(upstream, ns),
            json6902("RequestAuthentication", "dex-jwt", [
                {"op": "replace", "path": "/spec/jwtRules", "value": identity.jwt_rules(facts)}])]


def dex_patches(facts: FrontDoorFacts) -> list[Patch]:
    """Our config.yaml; the placeholder Secrets dropped (ours carry the same names); the directory's CA mounted
    where the ldap connector's rootCA points."""
    ns = DEX.namespace
    patches = [replace_config("dex", ns, "config.yaml", identity.dex_config(facts)),
               delete("Secret", identity.DEX_CLIENT_SECRET, ns), delete("Secret", identity.DEX_PASSWORDS, ns),
               bind_to_gateway("dex", ns)]
    ldap = facts.spec.identity_provider.ldap
    if ldap is not None and ldap.ca_secret_name:
        pod = {"containers": [{"name": "dex", "volumeMounts": [{"name": "ldap-ca", "mountPath": "/etc/dex/ldap-ca",
                                                                  "readOnly": True}]}],
               "volumes": [{"name": "ldap-ca", "secret": {"secretName": ldap.ca_secret_name}}]}
        patches.append(merge("apps/v1", "Deployment", "dex", ns, spec={"template": {"spec": pod}}))
    return patches


class FrontDoor(pulumi.ComponentResource):
    def __init__(self, name: str, platform: Platform, provider: k8s.Provider, secret: pulumi.Output[str] | None,
                 after: list[pulumi.Resource], team_namespaces: Mapping[str, pulumi.Resource] | None = None,
                 issuer: pulumi.Input[str] | None = None, opts: pulumi.ResourceOptions | None = None) -> None:
        """`secret`: the value of the front door's secret key (facts.secret_keys), None when unset; `after`: the
        components whose UIs it serves (their Services and pods must exist); `team_namespaces`: the team
        namespaces the web binder writes into; `issuer`: the cluster's ServiceAccount token issuer where the
        cluster reports it (ClusterContract.service_account_issuer), which the machine-token rules trust."""
        super().__init__("trainyard:platform:FrontDoor", name, None, opts)
        facts = platform.front_door
        assert facts is not None
        tls = facts.spec.tls
        assert tls is not None

        def directory(resource: str, path: str, depends: list[pulumi.Resource],
                      patches: list[Patch] | pulumi.Output[list[Patch]] | None = None) -> k8s.kustomize.v2.Directory:
            return kustomize_directory(resource, KUBEFLOW_MANIFESTS, path, child_opts(self, provider, depends),
                                       patches=patches or [])

        certs = directory(CERT_MANAGER.name, "common/cert-manager/base", [])
        crds = directory("istio-crds", "common/istio/istio-crds/base", [])
        istio_ns = directory("istio-namespace", "common/istio/istio-namespace/base", [], istio_namespace_patches())
        istio = directory("istio", "common/istio/istio-install/overlays/oauth2-proxy", [crds, istio_ns],
                          istio_install_patches(platform.spec.laptop, sidecars=platform.pipelines is not None,
                                                gke=platform.spec.cluster.gke is not None))
        http01 = tls.acme is not None and tls.acme.solver == "http01"
        gateway = directory("gateway", "common/istio/kubeflow-istio-resources/base", [istio],
                            gateway_patches(facts.spec.host, tls_secret(facts), http01))
        oauth2 = directory(OAUTH2_PROXY.name, "common/oauth2-proxy/overlays/m2m-dex-only", [istio],
                           identity.with_cluster_issuer(facts, issuer, oauth2_proxy_patches))
        signed_in = [oauth2]
        if facts.dex:
            signed_in.append(directory("dex", "common/dex/overlays/oauth2-proxy", [istio], dex_patches(facts)))
        self._certificate(cluster_issuer(platform, facts), facts, provider, certs, istio_ns, after)
        self._secrets(facts, provider, secret, signed_in)
        binder = bool(facts.team_namespaces)
        if binder:
            teams = {ns: team.name for team in platform.teams for ns in team.namespaces}
            web_binder.WebBinder(named("web-binder"), facts, teams, identity.SESSION_HOURS * 3600, provider,
                                 [istio_ns, *(team_namespaces or {}).values()], pulumi.ResourceOptions(parent=self))
        self._uis(facts, provider, [gateway, *after], istio_ns, binder)
        self._machines(facts, provider, istio, http01, issuer)
        self.register_outputs({"url": facts.url, "issuer": facts.issuer, "dex": facts.dex,
                               "uis": {ui.name: f"{facts.url}{ui.path}" for ui in facts.uis}})

    def _certificate(self, spec: dict[str, Any] | None, facts: FrontDoorFacts, provider: k8s.Provider,
                     certs: pulumi.Resource, istio_ns: pulumi.Resource, after: list[pulumi.Resource]) -> None:
        if spec is None:
            return
        opts = child_opts(self, provider, [certs])
        issuer = kube_object("front-door-issuer", CERT_MANAGER_API, "ClusterIssuer", metadata(ISSUER), opts,
                             spec=spec)
        issuer_ref = {"kind": "ClusterIssuer", "name": ISSUER, "group": "cert-manager.io"}
        kube_object("front-door-certificate", CERT_MANAGER_API, "Certificate",
                    metadata(CERTIFICATE_SECRET, ISTIO.namespace), child_opts(self, provider, [issuer, istio_ns]),
                    spec={"secretName": CERTIFICATE_SECRET, "dnsNames": [facts.spec.host], "issuerRef": issuer_ref})
        if GRAFANA in facts.uis and trusts_corporate_ca(facts):
            # Only for its ca.crt: Grafana reads Dex's keys through the host and must trust the corporate CA
            # (grafana/sso.py), in its namespace (observability is among `after`).
            kube_object("front-door-grafana-ca", CERT_MANAGER_API, "Certificate",
                        metadata(GRAFANA_CA_SECRET, MONITORING.namespace), child_opts(self, provider, [issuer, *after]),
                        spec={"secretName": GRAFANA_CA_SECRET, "dnsNames": [facts.spec.host], "issuerRef": issuer_ref})

    def _secrets(self, facts: FrontDoorFacts, provider: k8s.Provider, secret: pulumi.Output[str] | None,
                 signed_in: list[pulumi.Resource]) -> None:
        """Ours in place of upstream's placeholders; absent while the key is unset (the pods then wait)."""
        if secret is None:
            return
        oauth2, *dex = signed_in
        values = {(OAUTH2_PROXY.namespace, identity.OAUTH2_SECRET, oauth2):
                  secret.apply(lambda v: identity.oauth2_proxy_secret(facts, v))}
        if dex:
            pair = secret.apply(lambda v: identity.dex_secrets(facts, v))
            values[(DEX.namespace, identity.DEX_CLIENT_SECRET, dex[0])] = pair.apply(lambda p: p[0])
            values[(DEX.namespace, identity.DEX_PASSWORDS, dex[0])] = pair.apply(lambda p: p[1])
        for (namespace, name, owner), data in values.items():
            kube_object(f"{namespace}-{name}", "v1", "Secret", metadata(name, namespace),
                        child_opts(self, provider, [owner]), type="Opaque", stringData=pulumi.Output.secret(data))

    def _machines(self, facts: FrontDoorFacts, provider: k8s.Provider, istio: pulumi.Resource,
                  http01: bool, issuer: pulumi.Input[str] | None) -> None:
        """The header guard; the cluster-jwks-proxy when the cluster's token keys are read through it; the
        IngressClass cert-manager's http01 solver Ingress names."""
        opts = child_opts(self, provider, [istio])
        kube_object("front-door-header-guard", ISTIO_SECURITY_API, "AuthorizationPolicy",
                    metadata(identity.HEADER_GUARD, ISTIO.namespace), opts,
                    spec=identity.with_cluster_issuer(facts, issuer, identity.header_guard))
        if facts.machine_issuer is not None and facts.machine_issuer.proxied:
            jwks_proxy(self, provider, opts)
        if http01:
            kube_object("front-door-ingress-class", NETWORKING_API, "IngressClass", metadata(INGRESS_CLASS), opts,
                        spec={"controller": INGRESS_CONTROLLER})

    def _uis(self, facts: FrontDoorFacts, provider: k8s.Provider, after: list[pulumi.Resource],
             istio_ns: pulumi.Resource, binder: bool) -> None:
        opts = child_opts(self, provider, after)
        kube_object("front-door-gateway-ingress", NETWORKING_API, "NetworkPolicy",
                    metadata("allow-web-to-gateway", ISTIO.namespace), child_opts(self, provider, [istio_ns]),
                    spec=gateway_ingress())
        if binder:
            kube_object("front-door-web-access", ISTIO_NETWORKING_API, "VirtualService",
                        metadata("web-access", ISTIO.namespace), opts,
                        spec={"gateways": [GATEWAY_REF], "hosts": [facts.spec.host], "http": [web_access_route()]})
        if not facts.uis:
            return
        kube_object("front-door-uis", ISTIO_NETWORKING_API, "VirtualService", metadata("uis", ISTIO.namespace), opts,
                    spec={"gateways": [GATEWAY_REF], "hosts": [facts.spec.host],
                          "http": [ui_route(ui, binder) for ui in facts.uis]})
        for ui in facts.uis:
            namespace, spec = ui_ingress(ui)
            kube_object(f"front-door-{ui.name}-ingress", NETWORKING_API, "NetworkPolicy",
                        metadata(f"allow-gateway-to-{ui.name}", namespace), opts, spec=spec)


def jwks_proxy(parent: pulumi.Resource, provider: k8s.Provider, opts: pulumi.ResourceOptions) -> None:
    """The vendored component common/oauth2-proxy/components/cluster-jwks-proxy, as objects of ours: its image is
    unpinned upstream (`docker.io/bitnami/kubectl`, rewritten to `bitnamisecure/kubectl:latest`), ours is the
    platform's pinned kubectl. `kubectl proxy` serves only the issuer's discovery document and keys, GET only,
    as its ServiceAccount (Kubernetes binds service-account-issuer-discovery to every ServiceAccount)."""
    ns, name = ISTIO.namespace, JWKS_PROXY
    probe = {"httpGet": {"path": "/openid/v1/jwks", "port": "http"}, "periodSeconds": 15, "timeoutSeconds": 5}
    container = {
        "name": "kubectl-proxy", "image": KUBECTL_IMAGE, "command": ["kubectl"],
        "args": ["proxy", "--address=0.0.0.0", "--port=8080", "--accept-hosts=.*",
                 "--accept-paths=^(?:/openid/v1/jwks)|(?:/.well-known/openid-configuration)$",
                 "--reject-methods=^(POST|PUT|PATCH|DELETE|HEAD|OPTIONS|CONNECT|TRACE)$"],
        "ports": [{"name": "http", "containerPort": 8080}], "readinessProbe": probe, "livenessProbe": probe,
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
        "securityContext": web_binder.RESTRICTED_CONTAINER}
    pod = {"metadata": {"labels": JWKS_PROXY_LABELS},
           "spec": {"serviceAccountName": name, "securityContext": web_binder.RESTRICTED_POD,
                    "containers": [container]}}
    kube_object("front-door-jwks-proxy-account", "v1", "ServiceAccount", metadata(name, ns, JWKS_PROXY_LABELS), opts)
    kube_object("front-door-jwks-proxy", "apps/v1", "Deployment", metadata(name, ns, JWKS_PROXY_LABELS), opts,
                spec={"replicas": 1, "selector": {"matchLabels": JWKS_PROXY_LABELS}, "template": pod})
    kube_object("front-door-jwks-proxy-service", "v1", "Service", metadata(name, ns, JWKS_PROXY_LABELS), opts,
                spec={"selector": JWKS_PROXY_LABELS, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]})


def front_door(platform: Platform, provider: k8s.Provider, secret: pulumi.Output[str] | None,
               after: list[pulumi.Resource],
               team_namespaces: Mapping[str, pulumi.Resource] | None = None,
               issuer: pulumi.Input[str] | None = None) -> FrontDoor | None:
    """The stack's front door, when it declares one (on the manager only: a worker's facts carry none)."""
    if platform.front_door is None:
        return None
    return FrontDoor(named("front-door"), platform, provider, secret, after, team_namespaces, issuer)
