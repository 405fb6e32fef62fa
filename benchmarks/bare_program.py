"""The floor any Pulumi Python program pays: N plain Kubernetes objects on one provider, no logic."""

import pulumi
import pulumi_kubernetes as k8s

count = int(pulumi.Config("bench").require("count"))
provider = k8s.Provider("kubernetes", context="bench")
for index in range(count):
    k8s.core.v1.ConfigMap(f"cm-{index}", metadata={"name": f"cm-{index}", "namespace": "bench"},
                          data={"index": str(index)}, opts=pulumi.ResourceOptions(provider=provider))
