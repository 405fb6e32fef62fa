"""A Pulumi program of the tenancy and access components alone, and one namespace guarded by network.py
(tests/parts.py runs it under the offline engine's mocks): their objects are built by the code under test in the
test's own process, with no chart rendered."""

import pulumi
import pulumi_kubernetes as k8s

from infra.kit.objects import kube_object, metadata
from infra.platform.network import guard_namespace, metrics, webhooks
from infra.platform.rbac import Access
from infra.platform.tenancy import Tenancy
from infra.spec import load_pulumi

platform = load_pulumi()
provider = k8s.Provider("k8s")
tenancy = Tenancy("tenancy", platform, provider)
Access("access", platform, provider, tenancy.namespaces)

# A platform namespace guarded by infra/platform/network.py, as a component guards its own.
guarded = kube_object("ns-guarded", "v1", "Namespace", metadata("guarded"), pulumi.ResourceOptions(provider=provider))
guard_namespace(tenancy, provider, "guarded", guarded, [webhooks(9443, "the example webhook"), metrics(8080, 8443)])
