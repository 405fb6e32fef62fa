"""Generated documentation: one page per stack (docs/stacks/) and the stack-file reference, both
derived from the same spec and rendering as `pulumi up` uses, so they cannot drift from the code."""
