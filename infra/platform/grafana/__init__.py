"""Grafana behind the front door: signing people in from the gateway's token (sso.py), one organization per team
(orgs.py), and the program that makes those organizations inside Grafana's pod (bootstrap.py)."""
