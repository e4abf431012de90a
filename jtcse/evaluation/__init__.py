"""Evaluation: SentEval-protocol STS, MTEB runs, geometry diagnostics."""
