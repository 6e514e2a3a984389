"""The audit's contract: what is audited (``Subject``), how (``AuditOptions``, ``StreamOptions``,
the scenario record), and whose error an error is."""
