"""Plotly figure builders (no UI imports): data in, ``go.Figure`` out."""
