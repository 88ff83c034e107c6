"""Rendering: matplotlib charts and graph drawings built from the exporter's plain data."""
