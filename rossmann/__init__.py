"""Rossmann."""
