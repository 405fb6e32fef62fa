"""CI reaches the cluster it deploys: a cloud cluster's API endpoint admits only the stack's networks or its VPC,
which GitHub's hosted runners are outside of, so the stack names a self-hosted runner (`ci.runner`)."""

from __future__ import annotations

from infra.checks.context import Context
from infra.spec import Finding
from infra.spec.cluster import SELF_HOSTED


def check_ci_runner(ctx: Context) -> list[Finding]:
    spec = ctx.platform.spec
    if spec.cluster.kind == "existing":
        return []  # an existing cluster's reach is the site's own (its runner is declared alike, not required)
    if spec.ci is not None and spec.ci.self_hosted:
        return []
    endpoint = getattr(spec.cluster.chosen, "endpoint", None)
    admits = ("its VPC only" if endpoint is None or endpoint.private
              else f"{', '.join(endpoint.cidrs)} only")
    return [Finding("ci", "ci.runner", f"the {spec.cluster.kind} API endpoint admits {admits}, and GitHub's hosted "
                    "runners come from neither: set ci.runner to the labels of a self-hosted runner inside those "
                    f"networks (e.g. [{SELF_HOSTED}, trainyard-{spec.cluster.kind}]) and run the stack's workflow "
                    "rows there")]
