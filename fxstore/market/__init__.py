"""What is true of the market whatever the data: CME sessions and trading days, contract
symbols and expiries.

Every stage may use it (ingest assigns records to trading days, synth lays out sessions,
features and train count bars per session); it imports no stage.
"""
