"""Where the workflows that deploy, preview and check drift for this stack run (.github/workflows). A cloud
cluster's API endpoint admits only the stack's own networks (`endpoint.cidrs`) or its VPC (`private`), and
GitHub's hosted runners come from neither: a cloud stack names the labels of a self-hosted runner inside those
networks, and each workflow's matrix runs the stack there (tests/test_workflows.py reads them against it)."""

from __future__ import annotations

from pydantic import Field, field_validator

from infra.spec.base import Strict

SELF_HOSTED = "self-hosted"


class CiSpec(Strict):
    """`runner`: the runs-on labels of the runner the stack's workflows use, e.g. [self-hosted, trainyard-aws]."""

    runner: list[str] = Field(min_length=1)

    @field_validator("runner")
    @classmethod
    def _labels(cls, runner: list[str]) -> list[str]:
        if any(not label or label != label.strip() for label in runner) or len(set(runner)) != len(runner):
            raise ValueError("give each runner label once, non-empty, e.g. [self-hosted, trainyard-aws]")
        return runner
