"""The offline API server: would the API server of this stack's cluster admit an object, and if not, which
rule refuses it and why (CRD CEL rules, the operators' webhook rules, the stack's ValidatingAdmissionPolicies
with their bindings, Pod Security admission of the target namespace). Used by plan/validate and `trainyard admit`.
"""
