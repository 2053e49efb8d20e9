"""Streamlit dashboard: thin pages over :mod:`analysis_core`."""
