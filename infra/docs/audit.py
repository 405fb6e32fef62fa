"""docs/audit-policy.yaml: the audit policy of infra/spec/audit.py as the file a site's API server reads."""

from __future__ import annotations

import yaml

from infra.spec.audit import POLICY_FILE, audit_policy

HEADER = f"""\
# The Kubernetes API audit policy of Trainyard's on-prem and local stacks (docs/access.md), generated from
# infra/spec/audit.py by `trainyard docs`: do not edit. The site's API server runs with
#   --audit-policy-file={POLICY_FILE} (the stack's audit.policyFile)
#   --audit-log-path=<audit.destination> --audit-log-maxage=<audit.retentionDays>
# The first rule that matches a request decides its level.
"""


def audit_policy_file() -> str:
    return HEADER + yaml.safe_dump(audit_policy(), sort_keys=False, width=120)
