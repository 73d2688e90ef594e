"""Pure domain of egs-hub: no I/O, no clock (``now`` is always a parameter)."""
