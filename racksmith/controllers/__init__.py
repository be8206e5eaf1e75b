"""Racksmith."""
