"""Replaying caller audio: scripted real-time callers, scenarios, results and reports."""
