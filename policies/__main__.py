"""The pack as the Pulumi CLI runs it (`pulumi preview --policy-pack policies/`): it only builds the
PolicyPack, which serves the rules over gRPC until the CLI stops it. The rules live in policies.rules."""

from pulumi_policy import PolicyPack

from policies.rules import PACK_LEVEL, PACK_NAME, POLICIES

PolicyPack(name=PACK_NAME, policies=POLICIES, enforcement_level=PACK_LEVEL)
