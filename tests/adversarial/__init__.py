"""Adversarial suite (issue 7): crashes, kills, races, tampering, hostile input and fuzzing."""
