"""The front door's web access from directory groups: the web roles and the binder (binder.py), and the program the
binder's pod runs (server.py)."""
