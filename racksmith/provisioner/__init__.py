"""Provisioning backends behind one interface (see base.py)."""
