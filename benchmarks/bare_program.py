"""The floor any Pulumi Python program pays: N plain Kubernetes objects on one provider, no logic.

`bench:leaves` sets how many values each object carries (1 = a minimal ConfigMap), so the floor can be
measured both for minimal objects and for objects as large as the ones being compared.
"""

import pulumi
import pulumi_kubernetes as k8s

config = pulumi.Config("bench")
count = int(config.require("count"))
leaves = int(config.get("leaves") or 1)
provider = k8s.Provider("kubernetes", context="bench")
for index in range(count):
    k8s.core.v1.ConfigMap(f"cm-{index}", metadata={"name": f"cm-{index}", "namespace": "bench"},
                          data={f"key-{leaf}": str(index) for leaf in range(leaves)},
                          opts=pulumi.ResourceOptions(provider=provider))
